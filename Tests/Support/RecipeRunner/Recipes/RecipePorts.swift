import Foundation

/// Free TCP ports for what a run publishes on the host: a random one of 20000 to 29999 that no socket of this
/// machine has as its local port (`/proc/net/tcp` and `tcp6`), and not handed out before in this run. (doc-test's
/// ports are the documents' own.)
struct RecipePorts {
    static let range = 20000...29999
    private var given: Set<Int> = []

    /// The local ports of the sockets a `/proc/net/tcp` or `tcp6` text lists (`sl local_address ...`, the
    /// address's port in hex after its colon).
    static func localPorts(procNetTCP: String) -> Set<Int> {
        var ports = Set<Int>()
        for line in procNetTCP.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 1, let colon = fields[1].lastIndex(of: ":"),
                let port = Int(fields[1][fields[1].index(after: colon)...], radix: 16)
            else { continue }
            ports.insert(port)
        }
        return ports
    }

    /// The local ports of this machine's TCP sockets now.
    static func used() -> Set<Int> {
        ["/proc/net/tcp", "/proc/net/tcp6"].reduce(into: Set<Int>()) { ports, table in
            ports.formUnion(localPorts(procNetTCP: (try? String(contentsOfFile: table, encoding: .utf8)) ?? ""))
        }
    }

    /// A free port of `range`, given `used` (the sockets' ports); nil if there is none.
    mutating func next(used: Set<Int> = RecipePorts.used(), random: (ClosedRange<Int>) -> Int = { Int.random(in: $0) })
        -> Int?
    {
        let taken = used.union(given)
        guard taken.filter({ Self.range.contains($0) }).count < Self.range.count else { return nil }
        // Bounded: a random pick, then the first free one after it.
        let start = random(Self.range)
        for offset in 0..<Self.range.count {
            let port = Self.range.lowerBound + (start - Self.range.lowerBound + offset) % Self.range.count
            if !taken.contains(port) {
                given.insert(port)
                return port
            }
        }
        return nil
    }
}
