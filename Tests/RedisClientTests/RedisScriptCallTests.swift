import Testing

@testable import RedisClient

/// The script's calls as bytes, without a server: a request alone is its template with its keys and tag written in,
/// requests with the same arguments join one call, and both are exactly what hiredis formats for those arguments.
@Suite struct RedisScriptCallTests {
    struct Member: RedisScriptCallMember {
        var command: [UInt8]
        var call: RedisScriptCall
    }

    static let script = "return {ARGV[#ARGV]}"
    static let digest = RedisPipeline.scriptDigest(of: script)

    static func formatted(_ arguments: [String]) -> [UInt8] {
        var bytes: [UInt8] = []
        RedisCommand.append(arguments.map { Array($0.utf8) }, to: &bytes)
        return bytes
    }

    static func member(_ call: RedisScriptCall, keys: [String]) -> Member {
        Member(
            command: call.command { index, target in Array(keys[index].utf8).withUnsafeBytes(target.copyMemory(from:))
            },
            call: call)
    }

    @Test func aRequestAloneIsItsOwnCommandWithItsKeysAndTag() {
        let call = RedisScriptCall(script: Self.script, keyLengths: [3, 5], arguments: [Array("20".utf8)])
        let (command, taken) = RedisScriptCall.command(
            joining: [Self.member(call, keys: ["abc", "defgh"])][...], tag: 0x2a)
        #expect(taken == 1)
        #expect(
            command == Self.formatted(["EVALSHA", Self.digest, "2", "abc", "defgh", "20", "2", "000000000000002a"]))
    }

    @Test func requestsWithTheSameArgumentsJoinOneCallAndOthersWaitForTheNext() {
        let twoKeys = RedisScriptCall(script: Self.script, keyLengths: [2, 2], arguments: [Array("7".utf8)])
        // Another preparation with the same arguments joins too; other arguments do not.
        let oneKey = RedisScriptCall(script: Self.script, keyLengths: [4], arguments: [Array("7".utf8)])
        let other = RedisScriptCall(script: Self.script, keyLengths: [4], arguments: [Array("8".utf8)])
        let members = [
            Self.member(twoKeys, keys: ["a1", "p1"]), Self.member(oneKey, keys: ["a222"]),
            Self.member(other, keys: ["a333"]), Self.member(twoKeys, keys: ["a4", "p4"]),
        ]
        let (command, taken) = RedisScriptCall.command(joining: members[...], tag: 1)
        #expect(taken == 2)
        #expect(
            command == Self.formatted(["EVALSHA", Self.digest, "3", "a1", "p1", "a222", "7", "21", "0000000000000001"]))
        let (rest, next) = RedisScriptCall.command(joining: members[2...], tag: 2)
        #expect(next == 1, "other arguments: a call of its own")
        #expect(rest == Self.formatted(["EVALSHA", Self.digest, "1", "a333", "8", "1", "0000000000000002"]))
    }
}
