#if canImport(CJemalloc)
    import CJemalloc
#endif

/// The memory allocator the process runs on, for the startup lines.
///
/// The relay links jemalloc: glibc's malloc serialises a free of memory another thread allocated on
/// that thread's arena lock, and jemalloc keeps the relay's CPU per push lower and steadier
/// (BENCHMARKS.md, "The allocator").
enum Allocator {
    static var name: String {
        #if canImport(CJemalloc)
            var version: UnsafePointer<CChar>?
            var length = MemoryLayout<UnsafePointer<CChar>?>.size
            guard mallctl("version", &version, &length, nil, 0) == 0, let version else { return "jemalloc" }
            // "5.3.0-0-g54eaed1d…": the release, without the commit it was built from.
            let release = String(cString: version).prefix { $0 != "-" }
            return "jemalloc \(release)"
        #else
            return "the C library's malloc"
        #endif
    }
}
