package ruleset

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gaissmai/bart"
	"github.com/oschwald/maxminddb-golang/v2"
)

// GeoIP is a MaxMind-format country database read into prefixes by
// country: a geoip rule's countries become one prefix table, so a lookup
// is a table walk with no decoding and no allocation.
type GeoIP struct {
	countries map[string][]netip.Prefix // ISO code, upper case
}

type geoKey struct {
	path  string
	size  int64
	mtime time.Time
}

// geoCache keeps the databases read, by path, size and modification time;
// bounded, since each holds every network of its file.
var geoCache = struct {
	sync.Mutex
	m     map[geoKey]*GeoIP
	order []geoKey
}{m: map[geoKey]*GeoIP{}}

const geoCacheSize = 2

// LoadGeoIP reads the database at path (reused while the file is
// unchanged). Each network's country is its "country.iso_code", else its
// "registered_country.iso_code".
func LoadGeoIP(path string) (*GeoIP, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	k := geoKey{path, st.Size(), st.ModTime()}
	geoCache.Lock()
	g := geoCache.m[k]
	geoCache.Unlock()
	if g != nil {
		return g, nil
	}
	if g, err = readGeoIP(path); err != nil {
		return nil, err
	}
	geoCache.Lock()
	defer geoCache.Unlock()
	if _, ok := geoCache.m[k]; !ok {
		if len(geoCache.order) >= geoCacheSize {
			delete(geoCache.m, geoCache.order[0])
			geoCache.order = geoCache.order[1:]
		}
		geoCache.order = append(geoCache.order, k)
	}
	geoCache.m[k] = g
	return g, nil
}

func readGeoIP(path string) (*GeoIP, error) {
	db, err := maxminddb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: not a MaxMind-format database: %w", path, err)
	}
	defer db.Close()
	var rec struct {
		Country struct {
			ISOCode string `maxminddb:"iso_code"`
		} `maxminddb:"country"`
		Registered struct {
			ISOCode string `maxminddb:"iso_code"`
		} `maxminddb:"registered_country"`
	}
	g := &GeoIP{countries: map[string][]netip.Prefix{}}
	for r := range db.Networks() {
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rec.Country.ISOCode, rec.Registered.ISOCode = "", ""
		if err := r.Decode(&rec); err != nil {
			return nil, fmt.Errorf("%s: network %s: %w", path, r.Prefix(), err)
		}
		code := rec.Country.ISOCode
		if code == "" {
			code = rec.Registered.ISOCode
		}
		if code == "" {
			continue
		}
		p := r.Prefix()
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		code = strings.ToUpper(code)
		g.countries[code] = append(g.countries[code], p.Masked())
	}
	return g, nil
}

// Table is the prefix table of the networks of the countries (ISO codes,
// any case); nil when they have none.
func (g *GeoIP) Table(codes []string) *bart.Lite {
	var t *bart.Lite
	for _, c := range codes {
		for _, p := range g.countries[strings.ToUpper(c)] {
			if t == nil {
				t = new(bart.Lite)
			}
			t.Insert(p)
		}
	}
	return t
}

// Has reports whether the database has networks of the country.
func (g *GeoIP) Has(code string) bool { return len(g.countries[strings.ToUpper(code)]) > 0 }
