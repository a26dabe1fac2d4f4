/// The subcommands of `duo-relay-recipes`, each driven by one script in scripts/.
enum RecipeCommand {
    static let usage = """
        usage: duo-relay-recipes doc-test ARGUMENTS...        (scripts/doc-test)
               duo-relay-recipes extract DIR [DOCUMENT...]    (scripts/doc-test --extract DIR)
               duo-relay-recipes systemctl COMMAND [UNIT]     (doc-test's systemctl, where systemd is not PID 1)
               duo-relay-recipes journalctl -u UNIT ...       (doc-test's journalctl: the stand-in's journal)
               duo-relay-recipes socket-holder HOST:PORT BACKLOG FILE  (the stand-in's socket unit)
               duo-relay-recipes certbot certonly|renew ...   (doc-test's certbot: a CA of its own, the deploy hook)
               duo-relay-recipes container-test ARGUMENTS...  (scripts/container-test)
        """

    /// Runs the subcommand the arguments name; the exit status: 0 passed, 1 a check failed, 2 a usage error.
    static func run(_ arguments: [String]) -> Int32 {
        guard let subcommand = arguments.first else {
            printError(usage)
            return 2
        }
        let rest = Array(arguments.dropFirst())
        switch subcommand {
        case "extract": return RecipeExtract.run(rest)
        case "doc-test": return DocTestRun.main(rest)
        case "systemctl": return SystemctlStandIn.run(rest)
        case "journalctl": return SystemctlStandIn.journal(rest)
        case "socket-holder": return SocketUnitStandIn.hold(rest)
        case "certbot": return CertbotStandIn.run(rest)
        case "container-test": return ContainerTestRun.run(rest)
        default:
            printError("duo-relay-recipes: unknown command '\(subcommand)'\n\(usage)")
            return 2
        }
    }
}
