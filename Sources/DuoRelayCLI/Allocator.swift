#if canImport(CJemalloc)
    import CJemalloc
#endif

/// The memory allocator the process runs on, for the startup lines.
///
/// The relay links jemalloc: its threads hand every push's buffers to each other (a request built
/// by a server thread is freed by an APNs connection thread, an answer the other way), and glibc's
/// malloc serialises such frees on the allocating thread's arena lock (BENCHMARKS.md).
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
