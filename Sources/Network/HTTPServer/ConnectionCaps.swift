import Synchronization

/// The connection caps shared by every worker (docs/DESIGN.md, "The HTTP front", Caps): a global one and one per client
/// address. A connection counts from its accept until the server closes it (not until its handle's close callback,
/// a turn of the loop later: the client's next connection may be accepted in that turn). A connection accepted over
/// a cap does not count: it takes one of a few slots of its own, waits for its head and for room, and is answered
/// 503 `overloaded` when none comes (``HTTP1Connection/init(configuration:now:overCap:)``). One address at its cap
/// never shuts out another.
final class ConnectionCaps: Sendable {
    let total: Int
    /// 0: no cap per address.
    let perAddress: Int
    /// Connections over a cap held at once; beyond them, a connection over a cap is closed at once (a flood past
    /// the caps must not take every file descriptor).
    let overCapSlots: Int
    private let state = Mutex(State())

    private struct State {
        var open = 0
        var byAddress: [SocketPeer: Int] = [:]
        var overCap = 0
        /// Connections over a cap that wait for room: a release then wakes the workers.
        var waiting = 0
        /// Connections refused at a cap so far: closed at once, or over a cap until they closed (``refused``).
        var refused = 0
    }

    /// What an accepted connection is.
    enum Admission: Equatable {
        /// Within the caps: it counts, until ``release(_:)``.
        case admitted
        /// Over a cap: it holds an over-cap slot until ``admitLater(_:waiting:)`` finds room or ``leave(waiting:)``.
        case overCap
        /// Over a cap, and every over-cap slot is taken: close it at once.
        case refused
    }

    init(total: Int, perAddress: Int, overCapSlots: Int) {
        self.total = total
        self.perAddress = perAddress
        self.overCapSlots = overCapSlots
    }

    /// Counts a new connection from `peer`, or holds it over a cap, or refuses it.
    func admit(_ peer: SocketPeer) -> Admission {
        state.withLock { state in
            if count(peer, in: &state) { return .admitted }
            guard state.overCap < overCapSlots else {
                state.refused += 1
                return .refused
            }
            state.overCap += 1
            return .overCap
        }
    }

    /// A connection over a cap asks again: true when it now counts (its over-cap slot freed, and its wait ended when
    /// `waiting`); false when there is still no room, and it is then waiting (a release wakes the workers).
    func admitLater(_ peer: SocketPeer, waiting: Bool) -> Bool {
        state.withLock { state in
            guard count(peer, in: &state) else {
                if !waiting { state.waiting += 1 }
                return false
            }
            state.overCap -= 1
            if waiting { state.waiting -= 1 }
            return true
        }
    }

    /// A connection over a cap has closed without finding room (`waiting`: it was waiting): it was refused.
    func leave(waiting: Bool) {
        state.withLock { state in
            state.refused += 1
            state.overCap -= 1
            if waiting { state.waiting -= 1 }
        }
    }

    /// A connection over a cap stops waiting for room (it was answered 503).
    func stopWaiting() {
        state.withLock { $0.waiting -= 1 }
    }

    /// A connection counted by ``admit(_:)`` or ``admitLater(_:waiting:)`` has closed: the connections still
    /// counted, and whether a connection over a cap waits for the room this makes.
    func release(_ peer: SocketPeer) -> (open: Int, wake: Bool) {
        state.withLock { state in
            state.open -= 1
            if perAddress > 0, let count = state.byAddress[peer] {
                state.byAddress[peer] = count > 1 ? count - 1 : nil
            }
            return (state.open, state.waiting > 0)
        }
    }

    /// Connections counted now.
    var open: Int { state.withLock { $0.open } }

    /// Connections refused at a cap so far: answered 503 `overloaded` or closed without finding room, and those closed
    /// at once when every over-cap slot was taken.
    var refused: Int { state.withLock { $0.refused } }

    /// Connections over a cap held now (for tests).
    var overCap: Int { state.withLock { $0.overCap } }

    private func count(_ peer: SocketPeer, in state: inout State) -> Bool {
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
