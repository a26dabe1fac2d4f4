import MonotonicTime

/// A FIFO of requests waiting for a connection with room, with a lower bound on their
/// earliest deadline so that expiry sweeps run only when one may be due.
struct RequestQueue: Sendable {
    private var items: [PendingRequest] = []
    private var head = 0
    /// No queued request has a deadline before this instant (it may be stale, never late).
    private(set) var earliestDeadline: Instant?

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }

    mutating func append(_ request: PendingRequest) {
        items.append(request)
        lower(to: request.deadline)
    }

    /// Puts a request at the front (a retry has waited longest).
    mutating func prepend(_ request: PendingRequest) {
        if head > 0 {
            head -= 1
            items[head] = request
        } else {
            items.insert(request, at: 0)
        }
        lower(to: request.deadline)
    }

    mutating func popFirst() -> PendingRequest? {
        guard head < items.count else { return nil }
        let first = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
            earliestDeadline = nil
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return first
    }

    /// Removes and returns every request.
    mutating func removeAll() -> [PendingRequest] {
        let all = Array(items[head...])
        items.removeAll()
        head = 0
        earliestDeadline = nil
        return all
    }

    /// Removes and returns the requests whose deadline is at or before `now`.
    mutating func removeExpired(now: Instant) -> [PendingRequest] {
        guard let earliest = earliestDeadline, earliest <= now else { return [] }
        var expired: [PendingRequest] = []
        var kept: [PendingRequest] = []
        kept.reserveCapacity(count)
        var newEarliest: Instant?
        for item in items[head...] {
            if item.deadline <= now {
                expired.append(item)
            } else {
                kept.append(item)
                newEarliest = min(newEarliest ?? item.deadline, item.deadline)
            }
        }
        items = kept
        head = 0
        earliestDeadline = newEarliest
        return expired
    }

    private mutating func lower(to deadline: Instant) {
        earliestDeadline = min(earliestDeadline ?? deadline, deadline)
    }
}
