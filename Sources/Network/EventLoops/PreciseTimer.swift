import CSystem
import CUV
import Glibc

/// A one-shot timer with a deadline in nanoseconds of the monotonic clock: a timerfd watched by a `uv_poll_t`.
///
/// ``LoopTimer`` fires on the loop's millisecond clock, up to a millisecond late; that is right for deadlines
/// but not for pacing. An open-loop load generator sending every 200 µs from a ``LoopTimer`` would send in
/// bursts of five once a millisecond, and every send up to a millisecond after it was due. This timer wakes
/// the loop at its deadline (within the kernel's timer slack, about 50 µs). Each schedule is one system call
/// (`timerfd_settime`), each firing one more (the `read` that consumes it). Loop-bound: use only on its loop's
/// thread.
///
/// Ownership: the timer owns its timerDescriptor and closes it once the poll handle has closed.
public final class PreciseTimer: LoopHandle {
    /// Runs on the loop's thread when the timer fires; released when the timer closes.
    private var handler: (() -> Void)?
    private let timerDescriptor: Int32
    /// The deadline it is scheduled for (``EventLoop/monotonicNanoseconds()``); nil when not scheduled.
    public private(set) var deadline: UInt64?

    /// Creates a timer that is not scheduled. The handler may hold the timer's owner strongly: the reference
    /// is dropped when the timer closes.
    public init(on loop: EventLoop, handler: @escaping () -> Void) throws(LoopError) {
        timerDescriptor = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
        self.handler = handler
        super.init(loop: loop, type: UV_POLL)
        guard timerDescriptor >= 0 else {
            failedToOpen()
            throw LoopError(.system, "cannot create a timer (errno \(errno))")
        }
        let status = uv_poll_init(loop.raw, poll, timerDescriptor)
        guard status == 0 else {
            failedToOpen()
            Glibc.close(timerDescriptor)
            throw LoopError(status: status, "cannot watch a timer", code: .system)
        }
        didOpen()
        // Watched for as long as the timer is open: a disarmed timerfd is never readable.
        let started = uv_poll_start(
            poll, Int32(UV_READABLE.rawValue),
            { poll, _, _ in
                unsafeDowncast(LoopHandle.owner(of: poll!), to: PreciseTimer.self).expired()
            })
        guard started == 0 else {
            close()
            throw LoopError(status: started, "cannot watch a timer", code: .system)
        }
    }

    private var poll: UnsafeMutablePointer<uv_poll_t> {
        handle!.assumingMemoryBound(to: uv_poll_t.self)
    }

    /// True while the timer waits to fire.
    public var isScheduled: Bool { deadline != nil }

    /// Schedules the timer to fire at `deadline`, in ``EventLoop/monotonicNanoseconds()``; a deadline already
    /// passed fires on the loop's next turn. Replaces any earlier schedule.
    public func schedule(atNanoseconds deadline: UInt64) {
        loop.preconditionCurrent()
        guard !isClosing else { return }
        self.deadline = deadline
        // 0 would disarm the timer: the earliest instant is 1 ns.
        let instant = max(deadline, 1)
        var value = itimerspec()
        value.it_value.tv_sec = Int(instant / 1_000_000_000)
        value.it_value.tv_nsec = Int(instant % 1_000_000_000)
        timerfd_settime(timerDescriptor, Int32(TFD_TIMER_ABSTIME), &value, nil)
    }

    /// Stops the timer if it is scheduled; it can be scheduled again.
    public func cancel() {
        loop.preconditionCurrent()
        guard !isClosing, deadline != nil else { return }
        deadline = nil
        var value = itimerspec()
        timerfd_settime(timerDescriptor, 0, &value, nil)
    }

    private func expired() {
        var expirations: UInt64 = 0
        // EAGAIN: a spurious wake-up, or the timer was re-armed for later after it expired.
        guard read(timerDescriptor, &expirations, 8) == 8, !isClosing else { return }
        deadline = nil
        handler?()
    }

    override func willClose() {
        deadline = nil
    }

    override func didClose() {
        handler = nil
        Glibc.close(timerDescriptor)
    }
}
