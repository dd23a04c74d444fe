package shadowsocks

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, ":", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Vectors from OpenSSL: `openssl enc -aes-256-cbc -k password -P -md md5
// -nosalt` and the same with -aes-128-cbc.
func TestEVPBytesToKey(t *testing.T) {
	for _, tc := range []struct {
		password string
		n        int
		want     string
	}{
		{"password", 32, "5F4DCC3B5AA765D61D8327DEB882CF992B95990A9151374ABD8FF8C5A7A0FE08"},
		{"test-p@ss", 16, "76B2CDAD64E738CC91886DB2AF962688"},
	} {
		if got := EVPBytesToKey(tc.password, tc.n); !bytes.Equal(got, unhex(t, tc.want)) {
			t.Errorf("EVPBytesToKey(%q, %d) = %x, want %s", tc.password, tc.n, got, tc.want)
		}
	}
}

// Vector from OpenSSL: `openssl kdf -keylen 32 -kdfopt digest:SHA1
// -kdfopt hexkey:<key> -kdfopt hexsalt:000102...1f -kdfopt info:ss-subkey HKDF`.
func TestAEADSubkey(t *testing.T) {
	key := unhex(t, "5F4DCC3B5AA765D61D8327DEB882CF992B95990A9151374ABD8FF8C5A7A0FE08")
	salt := make([]byte, 32)
	for i := range salt {
		salt[i] = byte(i)
	}
	got, err := aeadSubkey(key, salt)
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, "EE:18:7A:ED:3F:87:57:49:07:A3:9D:B9:86:06:F6:0A:52:61:14:83:12:88:09:7C:AC:66:05:4B:33:A9:46:4F")
	if !bytes.Equal(got, want) {
		t.Fatalf("subkey %x, want %x", got, want)
	}
}

// Vectors from the BLAKE3 reference test vectors (derive_key, input bytes
// i % 251), with the material split in two parts as a PSK and a salt are.
func TestDeriveKey(t *testing.T) {
	const context = "BLAKE3 2019-12-27 16:29:52 test vectors context"
	input := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i % 251)
		}
		return b
	}
	for _, tc := range []struct {
		n     int
		split int
		want  string
	}{
		{1, 0, "b3e2e340a117a499c6cf2398a19ee0d29cca2bb7404c73063382693bf66cb06c"},
		{1, 1, "b3e2e340a117a499c6cf2398a19ee0d29cca2bb7404c73063382693bf66cb06c"},
		{1023, 32, "74a16c1c3d44368a86e1ca6df64be6a2f64cce8f09220787450722d85725dea5"},
		{1024, 1000, "7356cd7720d5b66b6d0697eb3177d9f8d73a4a5c5e968896eb6a689684302706"},
	} {
		in := input(tc.n)
		out := make([]byte, 32)
		deriveKey(out, context, in[:tc.split], in[tc.split:])
		if hex.EncodeToString(out) != tc.want {
			t.Errorf("derive_key of %d bytes: %x, want %s", tc.n, out, tc.want)
		}
	}
}

func TestNewRefusals(t *testing.T) {
	k16 := base64.StdEncoding.EncodeToString(make([]byte, 16))
	k32 := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, tc := range []struct {
		method, password, want string
	}{
		{"rc4-md5", "x", `unknown shadowsocks method "rc4-md5"`},
		{"aes-128-gcm", "", "the password is empty"},
		{"2022-blake3-aes-128-gcm", "", "needs a base64 PSK of 16 bytes"},
		{"2022-blake3-aes-128-gcm", "not base64!", "PSK 1 of 1 is not base64"},
		{"2022-blake3-aes-128-gcm", k32, "PSK 1 of 1 is 32 bytes; 2022-blake3-aes-128-gcm needs 16"},
		{"2022-blake3-aes-256-gcm", k32 + ":" + k16, "PSK 2 of 2 is 16 bytes"},
		{"2022-blake3-chacha20-poly1305", k32 + ":" + k32, "has no identity headers: give one PSK, not 2"},
	} {
		_, err := New(tc.method, tc.password)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %q) = %v, want an error with %q", tc.method, tc.password, err, tc.want)
		}
	}
	for _, m := range methods {
		pw := "any text"
		if m.Is2022 {
			pw = base64.StdEncoding.EncodeToString(make([]byte, m.KeyLen))
		}
		if _, err := New(m.Name, pw); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	}
}
