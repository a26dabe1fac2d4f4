import Foundation
import RelayCrypto
import RelayServer

// duo-relay: parses the command line and hands over to one command.
// Before anything uses OpenSSL: no exit-time cleanup racing with threads still at work (see OpenSSLLibrary).
OpenSSLLibrary.initializeWithoutExitCleanup()
// `--id=3` reads as `--id 3`, for every command.
let arguments = Usage.splittingEquals(Array(CommandLine.arguments.dropFirst()))
let status: Int32
switch arguments.first {
case "serve":
    protectSecrets()
    status = ServeCommand.run(Array(arguments.dropFirst()))
case "check":
    protectSecrets()
    status = CheckCommand.run(Array(arguments.dropFirst()))
case "keygen": status = KeygenCommand.run(Array(arguments.dropFirst()))
case "grant-info":
    protectSecrets()
    status = GrantInfoCommand.run(Array(arguments.dropFirst()))
case "dev": status = DevCommand.run(Array(arguments.dropFirst()))
case "apns-sim": status = SimulatorCommand.run(Array(arguments.dropFirst()))
case "push": status = PushCommand.run(Array(arguments.dropFirst()))
case "help", "--help", "-h": status = Usage.print()
case "version", "--version": status = Usage.version(Array(arguments.dropFirst()))
case nil: status = Usage.failWithUsage()
default: status = Usage.fail("unknown command" + (arguments.first.map { " '\($0)'" } ?? ""))
}
exit(status)

/// Before any secret is read: the APNs and relay keys stay out of core files and away from ptrace (`check`
/// reads the same keys as `serve`, and is run by hand beside other processes of the operator's user).
func protectSecrets() {
    if !SecretMemory.protect() {
        Log.line(
            "cannot make the process undumpable (prctl PR_SET_DUMPABLE)", level: .warning, event: "not_undumpable")
    }
}
