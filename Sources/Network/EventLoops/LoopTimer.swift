import CUV
import MonotonicTime

/// A one-shot timer on a loop (`uv_timer_t`): schedule it at a deadline or after a delay, re-schedule or
/// cancel it as often as needed (a heap update, no allocation), and close it when its owner is done.
///
/// Meant as one timer per connection, re-armed at each deadline change. Resolution is the loop's
/// millisecond clock (``EventLoop/now``). Loop-bound: use only on its loop's thread.
public final class LoopTimer: LoopHandle {
    /// Runs on the loop's thread when the timer fires; released when the timer closes.
    private var handler: (() -> Void)?
    /// The deadline it is scheduled for, in the loop's milliseconds; nil when not scheduled.
    public private(set) var deadline: UInt64?

    /// Creates a timer that is not scheduled. The handler may hold the timer's owner strongly: the
    /// reference is dropped when the timer closes.
    public init(on loop: EventLoop, handler: @escaping () -> Void) {
        self.handler = handler
        super.init(loop: loop, type: UV_TIMER)
        uv_timer_init(loop.raw, timer)
        didOpen()
    }

    private var timer: UnsafeMutablePointer<uv_timer_t> {
        handle!.assumingMemoryBound(to: uv_timer_t.self)
    }

    /// True while the timer waits to fire.
    public var isScheduled: Bool { deadline != nil }

    /// Schedules the timer to fire at `deadline` (the loop's milliseconds, as ``EventLoop/now``); a deadline
    /// already passed fires on the loop's next turn. Replaces any earlier schedule.
    public func schedule(at deadline: UInt64) {
        let now = loop.now
        schedule(afterMilliseconds: deadline > now ? deadline - now : 0)
    }

    /// Schedules the timer to fire once the clock (``EventLoop/monotonicNow()``) has reached `instant`: at the
    /// first millisecond of the loop's clock at or after it, so that it never fires before (the loop's
    /// milliseconds may lag the nanosecond clock a little: it fires that much later, never earlier). Already
    /// scheduled for that millisecond, it is left alone (no heap update).
    public func schedule(at instant: Instant) {
        let due = instant.millisecondsRoundedUp
        guard deadline != due else { return }
        schedule(at: due)
    }

    /// Schedules the timer for `instant` as ``schedule(at:)-(Instant)`` does, unless it is scheduled to fire at
    /// that millisecond or before already: it then fires early, and its owner, finding nothing due, schedules it
    /// again. For a deadline that moves often (every request's), most moves then cost nothing.
    public func schedule(noLaterThan instant: Instant) {
        let due = instant.millisecondsRoundedUp
        if let deadline, deadline <= due { return }
        schedule(at: due)
    }

    /// Schedules the timer to fire `milliseconds` after the loop's ``EventLoop/now``. Replaces any earlier
    /// schedule.
    public func schedule(afterMilliseconds milliseconds: UInt64) {
        loop.preconditionCurrent()
        guard !isClosing else { return }
        deadline = loop.now &+ milliseconds
        uv_timer_start(
            timer,
            { timer in
                let owner = unsafeDowncast(LoopHandle.owner(of: timer!), to: LoopTimer.self)
                owner.deadline = nil
                owner.handler?()
            }, milliseconds, 0)
    }

    /// Stops the timer if it is scheduled; it can be scheduled again.
    public func cancel() {
        loop.preconditionCurrent()
        guard !isClosing, deadline != nil else { return }
        deadline = nil
        uv_timer_stop(timer)
    }

    override func willClose() {
        deadline = nil
    }

    override func didClose() {
        handler = nil
    }
}
