// HTTPServer
import CMicroHTTPD
