package vmess

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"time"
)

// cmdKeySalt is appended to the user's UUID bytes before hashing them into
// the command key.
const cmdKeySalt = "c48619fe-8f02-49e0-b9e9-edf763e17e21"

// ParseUUID parses the 8-4-4-4-12 hexadecimal form of a UUID, in either case.
func ParseUUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("vmess: uuid %q is not of the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", s)
	}
	hexText := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(u[:], []byte(hexText)); err != nil {
		return u, fmt.Errorf("vmess: uuid %q is not hexadecimal", s)
	}
	return u, nil
}

// ID is a user's keys, derived once from the UUID: the command key that
// seals request headers and the AES block that encrypts auth ids.
type ID struct {
	cmdKey [16]byte
	authID cipher.Block
}

// NewID derives the keys of the user with the given UUID bytes.
func NewID(uuid [16]byte) *ID {
	h := md5.New()
	h.Write(uuid[:])
	h.Write([]byte(cmdKeySalt))
	id := &ID{}
	h.Sum(id.cmdKey[:0])
	k := kdf16(id.cmdKey[:], saltAuthIDKey)
	block, err := aes.NewCipher(k[:])
	if err != nil { // a 16-byte key always makes a cipher
		panic(err)
	}
	id.authID = block
	return id
}

// CmdKey is MD5(uuid bytes + the command key salt).
func (id *ID) CmdKey() [16]byte { return id.cmdKey }

// authID is the first 16 bytes of a sealed header: the time in seconds, four
// random bytes and the CRC-32 of both, encrypted with the auth id key.
func (id *ID) newAuthID(now time.Time, rnd io.Reader) ([16]byte, error) {
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(now.Unix()))
	if _, err := io.ReadFull(rnd, b[8:12]); err != nil {
		return b, fmt.Errorf("vmess: drawing the auth id: %w", err)
	}
	binary.BigEndian.PutUint32(b[12:16], crc32.ChecksumIEEE(b[:12]))
	id.authID.Encrypt(b[:], b[:])
	return b, nil
}
