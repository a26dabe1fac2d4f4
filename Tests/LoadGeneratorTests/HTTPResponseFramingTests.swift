import Testing

@testable import LoadGenerator

@Suite("The load generator's reading of answers")
struct HTTPResponseFramingTests {
    private func frame(_ text: String) -> HTTPResponseFraming.Response? {
        Array(text.utf8).withUnsafeBytes { HTTPResponseFraming.response(at: $0) }
    }

    @Test("a status, a body of Content-Length bytes, and the answer's length")
    func complete() throws {
        let text = "HTTP/1.1 429 Too Many Requests\r\nX: y\r\ncontent-LENGTH: 5\r\n\r\nhello"
        let response = try #require(frame(text + "HTTP/1.1 200 OK\r\n"))
        #expect(response.status == 429)
        #expect(response.retryAfter == nil)
        #expect(response.length == text.utf8.count)
        #expect(Array(Array(text.utf8)[response.body]) == Array("hello".utf8))
    }

    @Test("Retry-After in seconds, whatever its case")
    func retryAfter() throws {
        let text = "HTTP/1.1 429 Too Many Requests\r\nretry-AFTER: 17\r\nContent-Length: 2\r\n\r\n{}"
        #expect(try #require(frame(text)).retryAfter == 17)
    }

    @Test("nothing until the head and the whole body have arrived")
    func incomplete() {
        #expect(frame("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n") == nil)
        #expect(frame("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhell") == nil)
        #expect(frame("HTTP/1.1 204 No Content\r\n\r\n")?.body.count == 0)
    }
}
