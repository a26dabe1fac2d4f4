// HTTP2Client
import CCurl
