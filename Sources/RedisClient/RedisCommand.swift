import CHiredis

/// Commands in RESP, formatted by hiredis.
enum RedisCommand {
    /// One command's bytes (`*N\r\n$len\r\narg\r\n...`), appended to `buffer`.
    static func append(_ arguments: [[UInt8]], to buffer: inout [UInt8]) {
        var pointers: [UnsafePointer<CChar>?] = []
        var lengths: [Int] = []
        pointers.reserveCapacity(arguments.count)
        lengths.reserveCapacity(arguments.count)
        // Every argument must stay pinned while hiredis reads it: gather them into one contiguous copy.
        let joined = arguments.flatMap { $0 }
        joined.withUnsafeBufferPointer { all in
            let base = UnsafeRawPointer(all.baseAddress ?? UnsafePointer(bitPattern: 1)!)
            var offset = 0
            for argument in arguments {
                pointers.append((base + offset).assumingMemoryBound(to: CChar.self))
                lengths.append(argument.count)
                offset += argument.count
            }
            var target: UnsafeMutablePointer<CChar>?
            let length = redisFormatCommandArgv(&target, Int32(arguments.count), &pointers, lengths)
            guard length > 0, let target else { return }
            defer { redisFreeCommand(target) }
            buffer.append(contentsOf: UnsafeRawBufferPointer(start: target, count: Int(length)))
        }
    }

    static func bytes(_ arguments: String...) -> [[UInt8]] {
        arguments.map { Array($0.utf8) }
    }
}
