import CHiredis

/// hiredis's RESP reader: bytes in, whole replies out.
///
/// Owns one `redisReader` (freed in `deinit`); each reply object hiredis builds is converted and
/// freed at once. Used on the pipeline's loop only.
final class RedisReplyReader {
    private let reader: UnsafeMutablePointer<redisReader>

    init() {
        // redisReaderCreate only fails when out of memory.
        reader = redisReaderCreate()!
    }

    deinit { redisReaderFree(reader) }

    func feed(_ bytes: UnsafeRawBufferPointer) throws(RedisClientError) {
        guard bytes.count > 0 else { return }
        let status = redisReaderFeed(reader, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), bytes.count)
        guard status == REDIS_OK else { throw failure() }
    }

    /// The next whole reply, or nil when more bytes are needed.
    func next() throws(RedisClientError) -> RedisReply? {
        var object: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &object) == REDIS_OK else { throw failure() }
        guard let object else { return nil }
        defer { freeReplyObject(object) }
        return Self.convert(object.assumingMemoryBound(to: redisReply.self))
    }

    /// The next whole reply, sorted for matching (the script's usual answer `{tag, {integer[, integer]}, ...}` read
    /// straight from hiredis's object, without a Swift copy of it); nil when more bytes are needed.
    func nextParsed() throws(RedisClientError) -> RedisPipelineReply? {
        var object: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &object) == REDIS_OK else { throw failure() }
        guard let object else { return nil }
        defer { freeReplyObject(object) }
        let reply = object.assumingMemoryBound(to: redisReply.self)
        if let tagged = Self.tagged(reply) { return tagged }
        return .other(Self.convert(reply))
    }

    /// An array of a 16-hex-digit tag and one or more answers, each an array of one or two integers.
    private static func tagged(_ reply: UnsafeMutablePointer<redisReply>) -> RedisPipelineReply? {
        let value = reply.pointee
        guard value.type == REDIS_REPLY_ARRAY, value.elements >= 2, let elements = value.element,
            let first = elements[0]?.pointee, first.type == REDIS_REPLY_STRING,
            let tag = RedisTag.parse(UnsafeRawBufferPointer(start: first.str, count: first.len))
        else { return nil }
        var answers: [RedisScriptAnswer] = []
        answers.reserveCapacity(value.elements - 1)
        for index in 1..<value.elements {
            guard let answer = elements[index]?.pointee, answer.type == REDIS_REPLY_ARRAY,
                answer.elements == 1 || answer.elements == 2, let integers = answer.element
            else { return nil }
            func integer(_ index: Int) -> Int64? {
                guard let element = integers[index]?.pointee, element.type == REDIS_REPLY_INTEGER else { return nil }
                return Int64(element.integer)
            }
            guard let first = integer(0) else { return nil }
            if answer.elements == 1 {
                answers.append(RedisScriptAnswer(first))
            } else {
                guard let second = integer(1) else { return nil }
                answers.append(RedisScriptAnswer(first, second))
            }
        }
        return .tagged(tag: tag, answers: answers)
    }

    private func failure() -> RedisClientError {
        // hiredis's reason names the offending byte's kind, never more than a few bytes of it: not a key or secret.
        let reason = withUnsafeBytes(of: reader.pointee.errstr) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        return RedisClientError(.protocolError, "the server's reply is not RESP (\(reason))")
    }

    private static func convert(_ reply: UnsafeMutablePointer<redisReply>) -> RedisReply {
        let value = reply.pointee
        func text() -> [UInt8] {
            guard let str = value.str else { return [] }
            return Array(UnsafeRawBufferPointer(start: str, count: value.len))
        }
        switch value.type {
        case REDIS_REPLY_STATUS: return .status(String(decoding: text(), as: UTF8.self))
        case REDIS_REPLY_ERROR: return .error(String(decoding: text(), as: UTF8.self))
        case REDIS_REPLY_INTEGER: return .integer(Int64(value.integer))
        case REDIS_REPLY_NIL: return .bulk(nil)
        case REDIS_REPLY_STRING: return .bulk(text())
        case REDIS_REPLY_ARRAY:
            guard let elements = value.element else { return .array([]) }
            return .array((0..<value.elements).map { convert(elements[$0]!) })
        default: return .error("unknown reply type")
        }
    }
}
