package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"switchyard/provider"
	"switchyard/remote"
	"switchyard/ruleset"
	"switchyard/spec"
	"switchyard/supervisor"
)

// resources are the downloads of s: its url providers, then its url rule
// sets. Content that does not parse (a provider with no node) never
// replaces a cached copy.
func resources(s *spec.Spec) []remote.Resource {
	var out []remote.Resource
	for _, p := range s.Providers {
		if p.URL == "" {
			continue
		}
		out = append(out, remote.Resource{
			Kind: remote.KindProvider, Tag: p.Tag, URL: p.URL, Interval: p.Interval, Via: p.Via,
			CachePath: p.CachePath, Validate: validateProvider,
		})
	}
	for _, rs := range s.RuleSets {
		if rs.URL == "" {
			continue
		}
		path, format := rs.CachePath, rs.Format
		out = append(out, remote.Resource{
			Kind: remote.KindRuleSet, Tag: rs.Tag, URL: rs.URL, Interval: rs.Interval, Via: rs.Via,
			CachePath: rs.CachePath,
			Validate: func(b []byte) (int, error) {
				set, err := ruleset.Parse(path, format, b)
				if err != nil {
					return 0, err
				}
				return set.Entries(), nil
			},
		})
	}
	return out
}

// validateProvider refuses a download that is no provider content, or
// one none of whose nodes can be converted.
func validateProvider(b []byte) (int, error) {
	nodes, skipped, err := provider.Parse(b)
	if err != nil {
		return 0, err
	}
	if len(nodes) == 0 {
		if len(skipped) > 0 {
			return 0, fmt.Errorf("none of its %d nodes can be converted (the first: %s: %s)", len(skipped), skipped[0].Name, skipped[0].Reason)
		}
		return 0, errors.New("it has no nodes")
	}
	return len(nodes), nil
}

// describe names a resource in logs: "provider sub", "rule set ads".
func describe(r remote.Resource) string {
	if r.Kind == remote.KindRuleSet {
		return "rule set " + r.Tag
	}
	return "provider " + r.Tag
}

// newDownloads is the updater of s's downloads, dialing through sv's
// plane; onChange applies a changed download.
func newDownloads(s *spec.Spec, sv *supervisor.Supervisor, log *slog.Logger, onChange func(remote.Resource) error) *remote.Updater {
	dlog := log.With("component", "download")
	f := &remote.Fetcher{Dial: sv.DialVia, UserAgent: remote.UserAgent(versionString()), Log: dlog}
	return remote.New(resources(s), remote.Options{Fetcher: f, OnChange: onChange, Log: dlog})
}

// directDial dials for the CLI, which runs no supervisor: download_via is
// not followed, every download goes direct.
func directDial(ctx context.Context, _, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	return d.DialContext(ctx, network, addr)
}

func providerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "provider",
		Short: "Manage the url providers and rule sets of a configuration",
	}
	var path string
	update := &cobra.Command{
		Use:   "update [-c FILE] [TAG...]",
		Short: "Download url providers and rule sets now (all of them without a TAG)",
		Long: "Asks the running process to download now, through its API, when the configuration's [api] answers; " +
			"otherwise downloads into the cache directly (not through download_via), for the next start to read.",
		RunE: func(cmd *cobra.Command, tags []string) error {
			return providerUpdate(cmd.OutOrStdout(), cmd.ErrOrStderr(), path, tags)
		},
	}
	update.Flags().StringVarP(&path, "config", "c", "", "configuration file (TOML); default: the embedded default")
	cmd.AddCommand(update)
	return cmd
}

// providerUpdate is `switchyard provider update`: one line per resource,
// and exit status 1 when any failed.
func providerUpdate(out, errOut io.Writer, path string, tags []string) error {
	s, _, err := load(path)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return exitError{1}
	}
	rs := resources(s)
	if len(tags) > 0 {
		var picked []remote.Resource
		for _, tag := range tags {
			n := 0
			for _, r := range rs {
				if r.Tag == tag {
					picked = append(picked, r)
					n++
				}
			}
			if n == 0 {
				fmt.Fprintf(errOut, "%s: no url provider or rule set has this tag\n", tag)
				return exitError{1}
			}
		}
		rs = picked
	}
	if len(rs) == 0 {
		fmt.Fprintln(out, "the configuration has no url provider or rule set")
		return nil
	}
	update := localUpdate(rs)
	via := "downloaded here"
	if s.API != nil && apiAnswers(s.API) {
		update, via = apiUpdate(s.API), "through the running process at "+s.API.Listen
	}
	fmt.Fprintf(out, "updating %d (%s)\n", len(rs), via)
	failed := false
	for _, r := range rs {
		if err := update(r); err != nil {
			failed = true
			fmt.Fprintf(out, "%s: failed: %v\n", describe(r), err)
			continue
		}
		fmt.Fprintf(out, "%s: ok\n", describe(r))
	}
	if failed {
		return exitError{1}
	}
	return nil
}

// localUpdate downloads into the caches, direct.
func localUpdate(rs []remote.Resource) func(remote.Resource) error {
	f := &remote.Fetcher{Dial: directDial, UserAgent: remote.UserAgent(versionString())}
	return func(r remote.Resource) error {
		_, err := f.Fetch(context.Background(), r)
		return err
	}
}

// apiClient talks to the loopback API of the running process.
var apiClient = &http.Client{Timeout: remote.DefaultTimeout + 30*time.Second}

// apiBase is the API's base URL; a wildcard listen is asked on loopback.
func apiBase(a *spec.API) string {
	host, port, err := net.SplitHostPort(a.Listen)
	if err != nil {
		return "http://" + a.Listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// apiAnswers reports whether a switchyard API answers at a's address.
func apiAnswers(a *spec.API) bool {
	req, err := http.NewRequest(http.MethodGet, apiBase(a)+"/version", nil)
	if err != nil {
		return false
	}
	if a.Secret != "" {
		req.Header.Set("Authorization", "Bearer "+a.Secret)
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// apiUpdate asks the running process: PUT /providers/{proxies|rules}/TAG.
func apiUpdate(a *spec.API) func(remote.Resource) error {
	return func(r remote.Resource) error {
		kind := "proxies"
		if r.Kind == remote.KindRuleSet {
			kind = "rules"
		}
		req, err := http.NewRequest(http.MethodPut, apiBase(a)+"/providers/"+kind+"/"+url.PathEscape(r.Tag), nil)
		if err != nil {
			return err
		}
		if a.Secret != "" {
			req.Header.Set("Authorization", "Bearer "+a.Secret)
		}
		resp, err := apiClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return nil
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		msg := strings.TrimSpace(string(b))
		var body struct{ Message string }
		if json.Unmarshal(b, &body) == nil && body.Message != "" {
			msg = body.Message
		}
		return fmt.Errorf("%s (%s)", msg, resp.Status)
	}
}
