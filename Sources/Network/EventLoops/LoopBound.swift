/// Carries a loop-bound value (a listener, a connection, a worker's state) through `Sendable` work: it can
/// be moved to any thread, and its value read or replaced only on its loop's thread.
public struct LoopBound<Value>: @unchecked Sendable {
    // @unchecked: `box.value` is read and written only on `loop`'s thread, checked at each access.
    private final class Box {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    public let loop: EventLoop
    private let box: Box

    /// Wraps `value`; on `loop`'s thread only.
    public init(_ value: Value, on loop: EventLoop) {
        loop.preconditionCurrent()
        self.loop = loop
        box = Box(value)
    }

    /// The value; on the loop's thread only.
    public var value: Value {
        get {
            loop.preconditionCurrent()
            return box.value
        }
        nonmutating set {
            loop.preconditionCurrent()
            box.value = newValue
        }
    }
}
