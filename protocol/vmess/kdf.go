package vmess

import (
	"crypto/hmac"
	"crypto/sha256"
)

// KDF salts of the AEAD header and the response header.
const (
	kdfRoot               = "VMess AEAD KDF"
	saltAuthIDKey         = "AES Auth ID Encryption"
	saltHeaderLenKey      = "VMess Header AEAD Key_Length"
	saltHeaderLenNonce    = "VMess Header AEAD Nonce_Length"
	saltHeaderKey         = "VMess Header AEAD Key"
	saltHeaderNonce       = "VMess Header AEAD Nonce"
	saltResponseLenKey    = "AEAD Resp Header Len Key"
	saltResponseLenNonce  = "AEAD Resp Header Len IV"
	saltResponseHeaderKey = "AEAD Resp Header Key"
	saltResponseHeaderIV  = "AEAD Resp Header IV"
	hmacBlockSize         = sha256.BlockSize
	kdfSize               = sha256.Size
)

// kdf is VMess's key derivation: a chain of HMACs. The first function of the
// chain is HMAC-SHA256 keyed with "VMess AEAD KDF"; each element of path
// keys an HMAC whose hash is the function before it. kdf returns the last
// function of the chain applied to key.
func kdf(key []byte, path ...string) [kdfSize]byte {
	return chainMAC(path, key)
}

// kdf16 is the first 16 bytes of kdf, an AES-128 key.
func kdf16(key []byte, path ...string) [16]byte {
	full := kdf(key, path...)
	var k [16]byte
	copy(k[:], full[:])
	return k
}

// kdf12 is the first 12 bytes of kdf, an AEAD nonce.
func kdf12(key []byte, path ...string) [12]byte {
	full := kdf(key, path...)
	var n [12]byte
	copy(n[:], full[:])
	return n
}

// chainMAC applies the chain function named by path to the concatenation of
// msg. With no path it is HMAC-SHA256 keyed with the root salt; otherwise it
// is HMAC (RFC 2104) keyed with the last path element, over the chain
// function of the path before it, whose block size is SHA-256's. Every path
// element VMess uses (the salts, an auth id, a connection nonce) fits in one
// block, so a key is never hashed first.
func chainMAC(path []string, msg ...[]byte) [kdfSize]byte {
	var out [kdfSize]byte
	if len(path) == 0 {
		h := hmac.New(sha256.New, []byte(kdfRoot))
		for _, m := range msg {
			h.Write(m)
		}
		h.Sum(out[:0])
		return out
	}
	below := path[:len(path)-1]
	var key [hmacBlockSize]byte
	copy(key[:], path[len(path)-1])
	var ipad, opad [hmacBlockSize]byte
	for i, b := range key {
		ipad[i] = b ^ 0x36
		opad[i] = b ^ 0x5c
	}
	inner := chainMAC(below, append([][]byte{ipad[:]}, msg...)...)
	return chainMAC(below, opad[:], inner[:])
}
