extension String {
    /// Runs `body` over the string's UTF-8 bytes in place (a native string's own storage; others
    /// are copied once), without going through `String.UTF8View`'s iterator.
    ///
    /// Inlinable, so that each caller gets it specialized for its `Result`: called across modules unspecialized,
    /// it would look up `Optional<Result>`'s metadata at run time on every call, many times a push.
    @inlinable
    public func withUTF8Bytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return try copy.withUTF8(body)
    }
}
