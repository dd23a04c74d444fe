package vmess

import (
	"crypto/md5"
	"fmt"
	"runtime"

	"golang.org/x/sys/cpu"
)

// Security is how the body is protected. The values are the wire's.
type Security byte

const (
	SecurityAES128GCM        Security = 3
	SecurityChacha20Poly1305 Security = 4
	// SecurityNone sends the body in clear chunks with masked lengths.
	SecurityNone Security = 5
	// SecurityZero sends a stream's body with no framing at all. On the wire
	// it is SecurityNone without the chunk options.
	SecurityZero Security = 6
)

func (s Security) String() string {
	switch s {
	case SecurityAES128GCM:
		return "aes-128-gcm"
	case SecurityChacha20Poly1305:
		return "chacha20-poly1305"
	case SecurityNone:
		return "none"
	case SecurityZero:
		return "zero"
	}
	return fmt.Sprintf("security(%d)", byte(s))
}

// ParseSecurity parses a configured security. "auto" (and "") is
// aes-128-gcm where the processor has AES-GCM instructions and
// chacha20-poly1305 elsewhere.
func ParseSecurity(name string) (Security, error) {
	switch name {
	case "", "auto":
		return AutoSecurity(), nil
	case "aes-128-gcm":
		return SecurityAES128GCM, nil
	case "chacha20-poly1305":
		return SecurityChacha20Poly1305, nil
	case "none":
		return SecurityNone, nil
	case "zero":
		return SecurityZero, nil
	}
	return 0, fmt.Errorf("vmess: unknown security %q (expected auto, aes-128-gcm, chacha20-poly1305, none or zero)", name)
}

// hasAESGCMHardware is true where AES-GCM runs on dedicated instructions:
// amd64, arm64 and s390x with the AES and carry-less multiply extensions.
var hasAESGCMHardware = func() bool {
	switch runtime.GOARCH {
	case "amd64":
		return cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41 && cpu.X86.HasSSSE3
	case "arm64":
		return (cpu.ARM64.HasAES && cpu.ARM64.HasPMULL) || runtime.GOOS == "darwin"
	case "s390x":
		return cpu.S390X.HasAES && cpu.S390X.HasAESCTR && cpu.S390X.HasGHASH
	}
	return false
}()

// AutoSecurity is what "auto" means on this machine.
func AutoSecurity() Security {
	if hasAESGCMHardware {
		return SecurityAES128GCM
	}
	return SecurityChacha20Poly1305
}

// chachaKey expands a 16-byte body key to ChaCha20-Poly1305's 32 bytes:
// MD5 of the key, then MD5 of that.
func chachaKey(k []byte) [32]byte {
	var out [32]byte
	first := md5.Sum(k)
	copy(out[:16], first[:])
	second := md5.Sum(out[:16])
	copy(out[16:], second[:])
	return out
}
