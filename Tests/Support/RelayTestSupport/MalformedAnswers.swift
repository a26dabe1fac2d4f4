/// Answers from a server that are not HTTP/1.1 answers a strict reader takes, one broken rule each: another
/// protocol, a wrong version or status, bare LF or CR, obsolete folding, a field name that is not a token followed
/// at once by a colon, a control byte, a reason that is not printable ASCII. The response reader's tests and the
/// proxy tunnel's read them both.
public enum MalformedAnswers {
    public static let heads = [
        "SSH-2.0-OpenSSH_9.2\r\n\r\n",
        "http/1.1 200 OK\r\n\r\n",
        "HTTP/2 200\r\n\r\n",
        "HTTP/1.1 200 OK\nVia: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\n\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1 099 Low\r\n\r\n",
        "HTTP/1.1 600 High\r\n\r\n",
        "HTTP/1.1  200 OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "HTTP/1.2 200 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\n Folded: line\r\n\r\n",
        "HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
        "HTTP/1.1 200 OK\r\nName : space before colon\r\n\r\n",
        "HTTP/1.1 200 OK\r\n: no name\r\n\r\n",
        "HTTP/1.1 200 OK\r\nName: bell\u{07}\r\n\r\n",
        "HTTP/1.1 200 OK\rVia: x\r\n\r\n",
        "HTTP/1.1 200 O\u{00}K\r\n\r\n",
        "HTTP/1.1 407 Caf\u{E9}\r\n\r\n",
    ]
}
