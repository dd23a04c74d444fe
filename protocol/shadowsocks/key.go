package shadowsocks

import (
	"crypto/hkdf"
	"crypto/md5"
	"crypto/sha1"

	"lukechampine.com/blake3"
)

// EVPBytesToKey derives an n-byte key from a password as OpenSSL's
// EVP_BytesToKey does with MD5, one round and no salt: the key is
// D1 || D2 || ... cut to n bytes, with D1 = MD5(password) and
// Di = MD5(D(i-1) || password). It is how AEAD methods turn a text password
// into their key.
func EVPBytesToKey(password string, n int) []byte {
	key := make([]byte, 0, n+md5.Size)
	var prev []byte
	for len(key) < n {
		h := md5.New()
		h.Write(prev)
		h.Write([]byte(password))
		prev = h.Sum(nil)
		key = append(key, prev...)
	}
	return key[:n]
}

// aeadSubkey is the SIP004 session subkey: HKDF-SHA1 of the key with the
// salt and the info "ss-subkey", as long as the key.
func aeadSubkey(key, salt []byte) ([]byte, error) {
	return hkdf.Key(sha1.New, key, salt, "ss-subkey", len(key))
}

// BLAKE3 key derivation contexts of SIP022.
const (
	sessionContext  = "shadowsocks 2022 session subkey"
	identityContext = "shadowsocks 2022 identity subkey"
)

// deriveKey fills out with the BLAKE3 derive_key of the material a || b
// under context.
func deriveKey(out []byte, context string, a, b []byte) {
	material := make([]byte, 0, len(a)+len(b))
	material = append(material, a...)
	material = append(material, b...)
	blake3.DeriveKey(out, context, material)
}

// sessionSubkey is the SIP022 session subkey of a PSK and a salt (for TCP)
// or a session id (for UDP).
func sessionSubkey(psk, salt []byte) []byte {
	out := make([]byte, len(psk))
	deriveKey(out, sessionContext, psk, salt)
	return out
}

// pskHash is what an identity header carries for a PSK: the first 16 bytes
// of its BLAKE3 hash.
func pskHash(psk []byte) [16]byte {
	sum := blake3.Sum256(psk)
	return [16]byte(sum[:16])
}
