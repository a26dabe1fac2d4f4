import Foundation

extension ContainerTestRun {
    /// 4. Two relay containers and one Redis container: one phone's limit, admitted exactly once.
    func checkPair() throws(RecipeFailure) {
        say("4. two relay containers and one Redis container: one phone's 30 pushes")
        let pair = work + "/pair"
        try makeDirectory(pair)
        chmod(pair, 0o755)
        let password = Self.randomHex(24)
        try write(
            "bind 0.0.0.0\nport 6379\nsave \"\"\nappendonly no\nrequirepass \(password)\n", to: pair + "/redis.conf",
            mode: 0o644)
        let passwordFile = operatorDirectory + "/secrets/REDIS_PASSWORD"
        try write(password, to: passwordFile)
        ownSecret(passwordFile, mode: 0o440)
        secretsGiven.append(password)
        let redis = try podman([
            "run", "-d", "--name", "duo-ct-redis", "--ip", redisAddress, "--read-only", "--cap-drop", "ALL", "-v",
            "\(pair):/etc/pair:ro", redisImage, "/etc/pair/redis.conf",
        ])
        try expect(redis.succeeded, "pair: podman run redis")
        let template = FileManager.default.contents(atPath: operatorDirectory + "/relay.json") ?? Data()
        guard
            let config = ContainerRelayConfig.edited(
                template, ContainerRelayConfig.pair(redis: "redis://\(redisAddress):6379/0"))
        else { throw .check("pair: the operator's relay.json is not JSON") }
        try write(String(decoding: config, as: UTF8.self), to: pair + "/relay.json", mode: 0o644)
        let secrets = "/run/secrets/duo-relay"
        var relays: [String] = []
        for number in 1...2 {
            let port = try freePort()
            relays.append("http://127.0.0.1:\(port)")
            let started = try podman(
                [
                    "run", "-d", "--name", "duo-ct-relay-\(number)", "--read-only", "--cap-drop", "ALL",
                    "--security-opt",
                    "no-new-privileges", "--ulimit", "core=0",
                ]
                    + ContainerRecipeEdits.ulimitOptions(files: files, processes: processes).split(separator: " ").map(
                        String.init)
                    + [
                        "-p", "127.0.0.1:\(port):8787", "-v", "\(pair)/relay.json:/etc/duo-relay/relay.json:ro", "-v",
                        "\(pki)/ca.pem:/etc/duo-relay/ca.pem:ro", "-v", "\(operatorDirectory)/secrets:\(secrets):ro",
                        "-e", "RELAY_KEYS_FILE=\(secrets)/RELAY_KEYS", "-e",
                        "APNS_KEY_PRODUCTION_FILE=\(secrets)/APNS_KEY_PRODUCTION", "-e",
                        "REDIS_PASSWORD_FILE=\(secrets)/REDIS_PASSWORD", "-e",
                        "APNS_KEY_ID_PRODUCTION_FILE=\(secrets)/APNS_KEY_ID_PRODUCTION", "-e",
                        "APNS_TEAM_ID=ABCDE12345",
                        Self.documentedImage,
                    ])
            try expect(started.succeeded, "pair: podman run relay \(number)")
        }
        for relay in relays {
            let ready = RecipeHTTP.answers200(relay + "/readyz")
            let body = RecipeHTTP.get(relay + "/readyz")?.text ?? ""
            try expect(
                ready && body.contains("\"limits\":\"shared\""), "pair: a relay does not count in Redis: \(body)")
        }
        let token = Self.randomHex(32)
        let grants = [
            try grant(relays[0], token: token, check: "pair"), try grant(relays[1], token: token, check: "pair"),
        ]
        secretsGiven += [token] + grants
        let before = lineCount(deliveries)
        var delivered = 0
        var refused = 0
        for index in 0..<ContainerPairPushes.count {
            let route = ContainerPairPushes.route(index)
            let pushed = try push(relays[route.relay], grant: grants[route.grant])
            switch ContainerPairPushes.outcome(status: pushed.status, output: pushed.output + pushed.error) {
            case .delivered: delivered += 1
            case .refused: refused += 1
            case .other: break
            }
        }
        try expect(
            delivered == ContainerPairPushes.expectedDelivered && refused == ContainerPairPushes.expectedRefused,
            "pair: one phone over two relays: \(delivered) delivered, \(refused) refused, not 20 and 10")
        try expect(
            lineCount(deliveries) - before == ContainerPairPushes.expectedDelivered,
            "pair: the simulator did not get exactly 20 pushes")
        for number in 1...2 {
            let logs = try podman(["logs", "duo-ct-relay-\(number)"])
            try logsClean(logs.output + logs.error, check: "pair")
        }
        say("pair: one phone, two relays, one Redis with a password: 20 delivered, 10 refused")
    }
}
