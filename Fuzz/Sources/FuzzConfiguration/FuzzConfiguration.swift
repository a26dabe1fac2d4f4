import FuzzSupport
import JSON
import RelayCore

/// Configuration and `RELAY_KEYS` parsing: never crash; every error's description is one line
/// (it is printed as one log line) and never repeats a relay key value; every accepted
/// configuration holds docs/DESIGN.md's constraints.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfiguration(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    ConfigurationTarget.configuration(input)
    ConfigurationTarget.relayKeys(String(decoding: input, as: UTF8.self))
    return 0
}

@_cdecl("FuzzConfiguration_main")
public func fuzzConfigurationMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runLibFuzzer(argc, argv, fuzzConfiguration)
}

enum ConfigurationTarget {
    static func configuration(_ bytes: [UInt8]) {
        let config: RelayConfiguration
        do {
            config = try RelayConfiguration.parse(bytes)
        } catch {
            checkOneLine(error.description)
            return
        }
        invariant(ListenAddress(config.listen.description) == config.listen, "listen does not round-trip")
        if let metrics = config.metricsListen {
            invariant(ListenAddress(metrics.description) == metrics, "metrics_listen does not round-trip")
        }
        invariant(!config.apns.topic.isEmpty, "empty topic accepted")
        invariant(
            Notification.largestPayloadSize(placeholder: config.apns.placeholder) <= Notification.maximumPayloadSize,
            "a placeholder too long for APNs accepted")
        for environment in APNsEnvironment.allCases {
            invariant(config.apns.origin(environment).hasPrefix("https://"), "a non-https origin accepted")
        }
        invariant(config.grantLifetimeSeconds > 0, "zero grant lifetime accepted")
        invariant(config.pushLimit.requests > 0 && config.ipLimit.requests > 0, "a zero limit accepted")
    }

    static func relayKeys(_ text: String) {
        let keys: RelayKeys
        do {
            keys = try RelaySecrets.parseRelayKeys(text)
        } catch {
            checkOneLine(error.description)
            // No key value is ever repeated in an error (values long enough to be keys).
            if case .object(let entries)? = JSONValue.parse(Array(text.utf8)) {
                for case .string(let value) in entries.values where value.count >= 32 && !value.contains(" ") {
                    invariant(!error.description.contains(value), "a RELAY_KEYS error repeats a value")
                }
            }
            return
        }
        invariant(!keys.ids.isEmpty, "RELAY_KEYS without keys accepted")
        for id in keys.ids { invariant(keys[id]?.byteCount == 32, "a relay key is not 32 bytes") }
    }

    static func checkOneLine(_ description: String) {
        invariant(!description.isEmpty, "empty error description")
        invariant(!description.contains(where: \.isNewline), "an error description spans several lines")
        invariant(
            !description.unicodeScalars.contains { $0.properties.generalCategory == .control },
            "an error description holds a control character")
    }
}
