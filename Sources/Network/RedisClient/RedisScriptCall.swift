/// One call of the script prepared once, and the bytes of the calls made from it, without I/O: its command for a
/// request alone, formatted by hiredis with keys of fixed lengths, so that a request only copies it and writes its
/// own keys (and the pipeline its tag) into their places; and the command of several requests written together,
/// which join one call when their arguments are the same.
///
/// A call's `KEYS` are its requests' keys in order; its `ARGV` the requests' arguments, then how many keys each
/// request has (one digit each: `"2"`, `"21"`, ...), then the call's tag (``RedisTag``).
/// (A class: every request made from it holds it, one reference rather than four.)
public final class RedisScriptCall: Sendable {
    let template: [UInt8]
    let keyRanges: [Range<Int>]
    let arguments: [[UInt8]]
    /// The script's digest it names: usable with every pipeline of that script.
    let scriptDigest: String

    /// The call of `script` with keys of `keyLengths` bytes (one to nine) and `arguments`.
    public init(script: String, keyLengths: [Int], arguments: [[UInt8]]) {
        precondition((1...9).contains(keyLengths.count), "a request has one to nine keys (one digit in a call)")
        let scriptDigest = RedisPipeline.scriptDigest(of: script)
        // Formatted once per key with another filler byte in it: where the bytes differ is where the key is.
        func formatted(changing changed: Int?) -> [UInt8] {
            var parts: [[UInt8]] = [
                Array("EVALSHA".utf8), Array(scriptDigest.utf8), Array(String(keyLengths.count).utf8),
            ]
            for (index, length) in keyLengths.enumerated() {
                parts.append([UInt8](repeating: index == changed ? 0x31 : 0x30, count: length))
            }
            parts.append(contentsOf: arguments)
            parts.append(Array(String(keyLengths.count).utf8))
            parts.append(RedisTag.bytes(0))
            var bytes: [UInt8] = []
            RedisCommand.append(parts, to: &bytes)
            return bytes
        }
        let base = formatted(changing: nil)
        let ranges = keyLengths.indices.map { index -> Range<Int> in
            let other = formatted(changing: index)
            let differs = base.indices.filter { base[$0] != other[$0] }
            return differs.first!..<differs.last! + 1
        }
        precondition(zip(ranges, keyLengths).allSatisfy { $0.count == $1 })
        template = base
        keyRanges = ranges
        self.arguments = arguments
        self.scriptDigest = scriptDigest
    }

    /// Requests made from `self` and from `other` may share a call.
    func joins(_ other: RedisScriptCall) -> Bool {
        self === other || (scriptDigest == other.scriptDigest && arguments == other.arguments)
    }

    /// One request's command alone: the template with its keys written in by `writingKeys` (given each key's index
    /// and its place, of the prepared length); its tag is written when it leaves.
    func command(writingKeys: (Int, UnsafeMutableRawBufferPointer) -> Void) -> [UInt8] {
        var command = template
        command.withUnsafeMutableBytes { bytes in
            for (index, range) in keyRanges.enumerated() {
                writingKeys(index, UnsafeMutableRawBufferPointer(rebasing: bytes[range]))
            }
        }
        return command
    }

    /// The command of one call for `members` (from the oldest queued) with `tag`: the first's alone, or theirs
    /// together as far as they have its arguments; and how many it carries.
    static func command<Member: RedisScriptCallMember>(
        joining members: ArraySlice<Member>, tag: UInt64
    ) -> (command: [UInt8], taken: Int) {
        let first = members[members.startIndex]
        var taken = 1
        for member in members.dropFirst() {
            guard member.call.joins(first.call) else { break }
            taken += 1
        }
        guard taken > 1 else {
            var command = first.command
            command.withUnsafeMutableBytes { bytes in
                // The tag is the last bulk string: 16 bytes before the final CRLF.
                let end = bytes.count - 2
                RedisTag.write(tag, to: UnsafeMutableRawBufferPointer(rebasing: bytes[(end - RedisTag.length)..<end]))
            }
            return (command, 1)
        }
        // EVALSHA, the digest, the number of keys, every request's keys, the arguments, the counts, the tag: back to
        // back in one buffer, formatted by hiredis.
        let joined = members.prefix(taken)
        var bytes: [UInt8] = []
        var lengths: [Int] = []
        var counts: [UInt8] = []
        var keys = 0
        for member in joined {
            keys += member.call.keyRanges.count
            counts.append(UInt8(ascii: "0") + UInt8(member.call.keyRanges.count))
        }
        func append(_ part: some Collection<UInt8>) {
            bytes.append(contentsOf: part)
            lengths.append(part.count)
        }
        append("EVALSHA".utf8)
        append(first.call.scriptDigest.utf8)
        append(String(keys).utf8)
        for member in joined {
            for range in member.call.keyRanges { append(member.command[range]) }
        }
        for argument in first.call.arguments { append(argument) }
        append(counts)
        append(RedisTag.bytes(tag))
        var command: [UInt8] = []
        RedisCommand.append(joined: bytes, lengths: lengths, to: &command)
        return (command, taken)
    }
}

/// A request as a call carries it: its command alone (its keys written in) and the call it was made from.
protocol RedisScriptCallMember {
    var command: [UInt8] { get }
    var call: RedisScriptCall { get }
}
