// Package geoiptest writes small MaxMind-format country databases for
// tests.
package geoiptest

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// Write builds a GeoIP2-Country database of networks (CIDR -> ISO code)
// in dir and returns its path.
func Write(t testing.TB, dir string, networks map[string]string) string {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoIP2-Country", RecordSize: 24})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, code := range networks {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		rec := mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(code)}}
		if err := tree.Insert(n, rec); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "country.mmdb")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	return p
}
