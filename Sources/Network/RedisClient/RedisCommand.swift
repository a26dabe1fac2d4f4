import CHiredis

/// Commands in RESP, formatted by hiredis.
enum RedisCommand {
    /// One command's bytes (`*N\r\n$len\r\narg\r\n...`), appended to `buffer`.
    static func append(_ arguments: [[UInt8]], to buffer: inout [UInt8]) {
        // Every argument must stay pinned while hiredis reads it: gathered into one contiguous copy.
        append(joined: arguments.flatMap { $0 }, lengths: arguments.map(\.count), to: &buffer)
    }

    /// One command's bytes, its arguments given back to back in `joined` with their `lengths`, appended to `buffer`.
    static func append(joined: [UInt8], lengths: [Int], to buffer: inout [UInt8]) {
        joined.withUnsafeBufferPointer { all in
            let base = UnsafeRawPointer(all.baseAddress ?? UnsafePointer(bitPattern: 1)!)
            var pointers: [UnsafePointer<CChar>?] = []
            pointers.reserveCapacity(lengths.count)
            var offset = 0
            for length in lengths {
                pointers.append((base + offset).assumingMemoryBound(to: CChar.self))
                offset += length
            }
            var target: UnsafeMutablePointer<CChar>?
            let length = redisFormatCommandArgv(&target, Int32(lengths.count), &pointers, lengths)
            guard length > 0, let target else { return }
            defer { redisFreeCommand(target) }
            buffer.append(contentsOf: UnsafeRawBufferPointer(start: target, count: Int(length)))
        }
    }

    static func bytes(_ arguments: String...) -> [[UInt8]] {
        arguments.map { Array($0.utf8) }
    }
}
