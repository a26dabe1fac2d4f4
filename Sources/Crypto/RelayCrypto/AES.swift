/// The AES block cipher; see `AES.GCM`.
public enum AES {}
