import Synchronization
import Testing

@testable import RelayServer

/// When an instance may decide in Redis again after deciding alone (docs/DESIGN.md, "Failover"): only once a
/// carry-over round that began after its last local decision found nothing left; one carry-over at a time.
@Suite struct SharedCarryOverTests {
    @Test func nothingOwedAtFirstAndEachLocalDecisionIsOwedUntilARoundAfterItEnds() {
        let carry = SharedCarryOver()
        #expect(carry.isClear)
        carry.owe()
        carry.owe()
        #expect(!carry.isClear, "decisions stay local")
        #expect(carry.begin())
        #expect(!carry.begin(), "one carry-over at a time")
        let through = carry.owedSoFar
        // A local decision while the round takes what is owed: the round does not clear it.
        carry.owe()
        #expect(carry.end(through: through), "more was owed meanwhile: another carry-over begins")
        #expect(!carry.isClear)
        #expect(carry.begin())
        #expect(!carry.end(through: carry.owedSoFar))
        #expect(carry.isClear, "decisions are made in Redis again")
    }

    @Test func aRoundNotAnsweredLeavesEverythingOwedAndTheNextDecisionTriesAgain() {
        let carry = SharedCarryOver()
        carry.owe()
        #expect(carry.begin())
        carry.stop()
        #expect(!carry.isClear)
        #expect(carry.begin(), "tried again")
    }

    @Test func aPipelineSetUpAgainStartsTheCarryOverOnlyWhenSomethingIsOwed() {
        let carry = SharedCarryOver()
        let started = Mutex<[Int]>([])
        carry.setCarrier { worker in started.withLock { $0.append(worker) } }
        carry.ready(worker: 0)
        #expect(started.withLock { $0 }.isEmpty, "nothing owed")
        carry.owe()
        carry.ready(worker: 2)
        #expect(started.withLock { $0 } == [2])
    }
}
