// RelayCrypto
import COpenSSL
