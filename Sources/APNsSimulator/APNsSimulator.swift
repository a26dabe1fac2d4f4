// APNsSimulator
import CNGHTTP2
import COpenSSL
