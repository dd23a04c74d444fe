package vmess

import (
	"encoding/hex"
	"strings"
	"testing"
)

// Known answers computed with Xray-core v1.260327.0 (proxy/vmess/aead.KDF,
// protocol.NewID(...).CmdKey, encoding.GenerateChacha20Poly1305Key,
// encoding.NewShakeSizeParser).
func TestKDFKnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		key  string
		path []string
		want string
	}{
		{"key", nil, "385e28ac08671660f62ac976f5e64a31827aea172eff77cb2b046c52de9c08b0"},
		{"key", []string{"AEAD Resp Header Len Key"}, "5a6d5353e748c1938741fbfccefea35fa5c69d3c0993d6b1ea98bacd1f13296a"},
		{"0123456789abcdef", []string{"VMess Header AEAD Key", "AUTHIDAUTHIDAUTH", "nonce123"}, "2a1ecd4cc3cd71efc7bc17f6d79c5039322fc812b693c9c3ddca210f2f7350e6"},
	} {
		got := kdf([]byte(tc.key), tc.path...)
		if hex.EncodeToString(got[:]) != tc.want {
			t.Errorf("kdf(%q, %s) = %x, want %s", tc.key, strings.Join(tc.path, ", "), got, tc.want)
		}
	}
}

func TestCmdKeyKnownAnswer(t *testing.T) {
	u, err := ParseUUID("b831381d-6324-4d53-ad4f-8cda48b30811")
	if err != nil {
		t.Fatal(err)
	}
	k := NewID(u).CmdKey()
	if got := hex.EncodeToString(k[:]); got != "b50d916ac0cec067981af8e5f38a758f" {
		t.Fatalf("cmd key %s", got)
	}
}

func TestChachaKeyKnownAnswer(t *testing.T) {
	k := chachaKey([]byte("0123456789abcdef"))
	if got := hex.EncodeToString(k[:]); got != "4032af8d61035123906e58e067140cc567304ba676a616064c4340059e1b6370" {
		t.Fatalf("chacha key %s", got)
	}
}

// The padding length is drawn before the length mask, from one stream.
func TestMaskStreamKnownAnswer(t *testing.T) {
	s := &Session{wire: SecurityAES128GCM, opt: OptionChunkStream | OptionChunkMasking | OptionGlobalPadding}
	var iv [16]byte
	copy(iv[:], "0123456789abcdef")
	c := newChunkCrypto(s, [16]byte{}, iv)
	pad, mask := c.next()
	if pad != 0 || mask^100 != 0xc254 {
		t.Fatalf("pad %d, masked 100 = %#04x; want 0 and 0xc254", pad, mask^100)
	}
}

func TestParseUUID(t *testing.T) {
	for _, bad := range []string{"", "b831381d63244d53ad4f8cda48b30811", "b831381d-6324-4d53-ad4f-8cda48b3081g", "b831381d_6324-4d53-ad4f-8cda48b30811"} {
		if _, err := ParseUUID(bad); err == nil {
			t.Errorf("ParseUUID(%q) accepted", bad)
		}
	}
	a, _ := ParseUUID("B831381D-6324-4D53-AD4F-8CDA48B30811")
	b, _ := ParseUUID("b831381d-6324-4d53-ad4f-8cda48b30811")
	if a != b || a[0] != 0xb8 || a[15] != 0x11 {
		t.Fatalf("case: % x vs % x", a, b)
	}
}

func TestParseSecurity(t *testing.T) {
	for name, want := range map[string]Security{
		"aes-128-gcm": SecurityAES128GCM, "chacha20-poly1305": SecurityChacha20Poly1305,
		"none": SecurityNone, "zero": SecurityZero, "auto": AutoSecurity(), "": AutoSecurity(),
	} {
		got, err := ParseSecurity(name)
		if err != nil || got != want {
			t.Errorf("ParseSecurity(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := ParseSecurity("aes-128-cfb"); err == nil {
		t.Error("legacy aes-128-cfb accepted")
	}
	if a := AutoSecurity(); a != SecurityAES128GCM && a != SecurityChacha20Poly1305 {
		t.Errorf("auto is %v", a)
	}
}
