import TLS
import Testing

@Suite("ALPN lists, as the APNs client offers them and the simulator picks from them")
struct ALPNTests {
    @Test func aClientOffersEachNameAfterItsLength() {
        #expect(ALPN.wireList([ALPN.http2]) == [2, 0x68, 0x32])
        #expect(ALPN.wireList(["h2", "http/1.1"]) == [2, 0x68, 0x32, 8] + Array("http/1.1".utf8))
        #expect(ALPN.wireList([]).isEmpty)
    }

    @Test(arguments: [
        (["h2"], 1),
        (["http/1.1", "h2"], 10),
        (["h2c", "h2"], 5),
    ])
    func aServerFindsH2WhereverItStandsInTheOffer(offer: [String], offset: Int) {
        let wire = ALPN.wireList(offer)
        #expect(wire.withUnsafeBufferPointer { ALPN.find(ALPN.http2, in: $0) } == offset)
    }

    @Test func anOfferWithoutH2OrCutShortHasNoMatch() {
        for wire: [UInt8] in [
            ALPN.wireList(["http/1.1"]),
            ALPN.wireList(["h2c", "h3"]),
            [],
            [5, 0x68, 0x32],  // claims five bytes, holds two
            [8] + Array("http/1.".utf8) + [2, 0x68, 0x32],  // the first name runs into the second
        ] {
            #expect(wire.withUnsafeBufferPointer { ALPN.find(ALPN.http2, in: $0) } == nil, "\(wire)")
        }
    }
}
