// The answer type handlers build (``HTTPBasics/HTTPResponse``), shared with the HTTP/2 client: importing the server
// is enough to use it.
@_exported import HTTPBasics
