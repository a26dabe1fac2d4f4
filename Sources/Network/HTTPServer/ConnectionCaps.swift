import Synchronization

/// The connection caps shared by every worker (docs/DESIGN.md, "The HTTP front", Caps): a global one and one per client
/// address. Over a cap, a new connection is closed at once; one address at its cap never shuts out another.
final class ConnectionCaps: Sendable {
    let total: Int
    /// 0: no cap per address.
    let perAddress: Int
    private let state = Mutex(State())

    private struct State {
        var open = 0
        var byAddress: [SocketPeer: Int] = [:]
    }

    init(total: Int, perAddress: Int) {
        self.total = total
        self.perAddress = perAddress
    }

    /// Counts a new connection from `peer`, or refuses it (false) when a cap is reached.
    func admit(_ peer: SocketPeer) -> Bool {
        state.withLock { state in
            guard state.open < total else { return false }
            if perAddress > 0 {
                let count = state.byAddress[peer, default: 0]
                guard count < perAddress else { return false }
                state.byAddress[peer] = count + 1
            }
            state.open += 1
            return true
        }
    }

    /// A connection counted by ``admit(_:)`` has closed. Returns the connections still open.
    @discardableResult
    func release(_ peer: SocketPeer) -> Int {
        state.withLock { state in
            state.open -= 1
            if perAddress > 0, let count = state.byAddress[peer] {
                state.byAddress[peer] = count > 1 ? count - 1 : nil
            }
            return state.open
        }
    }

    /// Connections open now.
    var open: Int { state.withLock { $0.open } }
}
