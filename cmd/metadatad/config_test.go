package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/retention/embedded"
)

// parseCase parses args as the daemon's command line. When refused, the
// parse must fail, and it reports false; otherwise an error fails the test
// and it returns the config and true.
func parseCase(t *testing.T, args []string, refused bool) (config, bool) {
	t.Helper()
	c, err := parseConfig(args, io.Discard)
	if refused {
		if err == nil {
			t.Fatalf("parseConfig(%q) accepted it", args)
		}
		return c, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return c, true
}

func TestParseConfigControlPlaneTables(t *testing.T) {
	t.Setenv("METADATAD_DEVICE_STATE_TABLE", "DeviceStates")
	t.Setenv("METADATAD_VIDEO_TABLE", "FromEnv")
	for _, tc := range []struct {
		name                       string
		args                       []string
		video, device, acquisition string
	}{
		{"defaults and variables", nil, "FromEnv", "DeviceStates", "ImageAcquisitionInstance"},
		{"flags win", []string{"-video-table", "Videos", "-acquisition-instance-table", "Runs"}, "Videos", "DeviceStates", "Runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := parseCase(t, tc.args, false)
			if c.videoTable != tc.video || c.deviceStateTable != tc.device || c.acquisitionTable != tc.acquisition {
				t.Fatalf("tables %q, %q, %q; want %q, %q, %q",
					c.videoTable, c.deviceStateTable, c.acquisitionTable, tc.video, tc.device, tc.acquisition)
			}
		})
	}
}

func TestParseConfigEngineMemory(t *testing.T) {
	for _, tc := range []struct {
		name            string
		args            []string
		cache, memtable byteSize
		bad             bool
	}{
		{"defaults", nil, 256 << 20, 64 << 20, false},
		{"binary units", []string{"-cache-size", "1GiB", "-memtable-size", "16m"}, 1 << 30, 16 << 20, false},
		{"bare bytes", []string{"-cache-size", "1048576"}, 1 << 20, 64 << 20, false},
		{"zero refused", []string{"-memtable-size", "0"}, 0, 0, true},
		{"words refused", []string{"-cache-size", "lots"}, 0, 0, true},
		{"floor below a log file refused", []string{"-memtable-size", "1GiB", "-min-free-mib", "1126"}, 0, 0, true},
		{"floor above a log file", []string{"-memtable-size", "1GiB", "-min-free-mib", "1127"}, 256 << 20, 1 << 30, false},
		{"no floor, any memtable", []string{"-memtable-size", "1GiB", "-min-free-mib", "0"}, 256 << 20, 1 << 30, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseCase(t, tc.args, tc.bad)
			if !ok {
				return
			}
			if c.cacheSize != tc.cache || c.memTableSize != tc.memtable {
				t.Fatalf("cache %d, memtable %d; want %d, %d", c.cacheSize, c.memTableSize, tc.cache, tc.memtable)
			}
		})
	}
}

func TestParseConfigPurgeControl(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		rate      float64
		live      float64
		retention time.Duration
		wantErr   bool
	}{
		{"defaults: no row cap on the embedded store, which deletes by range and paces by time", nil, 0, 0, 30 * 24 * time.Hour, false},
		{"defaults on azure", append(slices.Clone(azureArgs), nil...), defaultPurgeRowsPerSecond, defaultPurgeLiveRowsPerSecond, 30 * 24 * time.Hour, false},
		{"set", []string{"-purge-rows-per-second", "2500", "-purge-job-retention", "168h"}, 2500, 0, 168 * time.Hour, false},
		{"set on azure", append(slices.Clone(azureArgs), "-purge-rows-per-second", "2500", "-purge-live-rows-per-second", "1000"), 2500, 1000, 30 * 24 * time.Hour, false},
		{"no cap", append(slices.Clone(azureArgs), "-purge-rows-per-second", "0", "-purge-live-rows-per-second", "0"), 0, 0, 30 * 24 * time.Hour, false},
		{"negative rate refused", []string{"-purge-rows-per-second", "-1"}, 0, 0, 0, true},
		{"negative live rate refused", append(slices.Clone(azureArgs), "-purge-live-rows-per-second", "-1"), 0, 0, 0, true},
		{"zero retention refused", []string{"-purge-job-retention", "0s"}, 0, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseCase(t, tc.args, tc.wantErr)
			if !ok {
				return
			}
			if c.purgeRowsPerSec != tc.rate || c.purgeLiveRowsPerSec != tc.live || c.purgeJobRetention != tc.retention {
				t.Errorf("rate %g, live rate %g, retention %s; want %g, %g, %s", c.purgeRowsPerSec, c.purgeLiveRowsPerSec, c.purgeJobRetention, tc.rate, tc.live, tc.retention)
			}
		})
	}
}

// azureArgs select the Azure backend on Azurite's well-known account.
var azureArgs = []string{"-store", "azure", "-azure-connection-string", "UseDevelopmentStorage=true"}

// TestParseConfigQueueDesignFlags: the flags of the queue design's tasks
// and its row cap while serving are for -store azure; the embedded store,
// whose purges have no tasks and pace by time, refuses them rather than
// ignore them; and Azure refuses the embedded pace's.
func TestParseConfigQueueDesignFlags(t *testing.T) {
	azure := azureArgs
	for _, tc := range []struct {
		name    string
		args    []string
		workers int
		bad     bool
	}{
		{"workers on azure", append(slices.Clone(azure), "-purge-workers", "3"), 3, false},
		{"queue on azure", append(slices.Clone(azure), "-purge-queue", "purges"), 0, false},
		{"workers embedded refused", []string{"-purge-workers", "3"}, 0, true},
		{"workers embedded, named, refused", []string{"-store", "embedded", "-purge-workers", "1"}, 0, true},
		{"queue embedded refused", []string{"-purge-queue", "purges"}, 0, true},
		{"live row cap embedded refused", []string{"-purge-live-rows-per-second", "1000"}, 0, true},
		{"live share on azure refused", append(slices.Clone(azure), "-purge-live-share", "0.2"), 0, true},
		{"section time on azure refused", append(slices.Clone(azure), "-purge-section-time", "1ms"), 0, true},
		{"live burst on azure refused", append(slices.Clone(azure), "-purge-live-burst", "10ms"), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseCase(t, tc.args, tc.bad)
			if ok && tc.workers > 0 && c.purgeWorkers != tc.workers {
				t.Errorf("workers %d, want %d", c.purgeWorkers, tc.workers)
			}
		})
	}
}

// TestParseConfigLivePace: the embedded store's purge pace while serving
// is set by its share, burst and section time, defaults included, and
// refuses values outside their range.
func TestParseConfigLivePace(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want embedded.Options
		bad  bool
	}{
		{"defaults", nil, embedded.Options{SectionTime: embedded.DefaultSectionTime, LiveShare: embedded.DefaultLiveShare, LiveBurst: embedded.DefaultLiveBurst}, false},
		{"set", []string{"-purge-live-share", "0.25", "-purge-section-time", "1ms", "-purge-live-burst", "20ms"}, embedded.Options{SectionTime: time.Millisecond, LiveShare: 0.25, LiveBurst: 20 * time.Millisecond}, false},
		{"never resting", []string{"-purge-live-share", "1"}, embedded.Options{SectionTime: embedded.DefaultSectionTime, LiveShare: 1, LiveBurst: embedded.DefaultLiveBurst}, false},
		{"no burst", []string{"-purge-live-burst", "0s"}, embedded.Options{SectionTime: embedded.DefaultSectionTime, LiveShare: embedded.DefaultLiveShare, LiveBurst: -1}, false},
		{"negative burst refused", []string{"-purge-live-burst", "-1ms"}, embedded.Options{}, true},
		{"no share refused", []string{"-purge-live-share", "0"}, embedded.Options{}, true},
		{"over all the time refused", []string{"-purge-live-share", "1.5"}, embedded.Options{}, true},
		{"no section time refused", []string{"-purge-section-time", "0s"}, embedded.Options{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseCase(t, tc.args, tc.bad)
			if ok && c.purgeLive != tc.want {
				t.Errorf("live pace %+v, want %+v", c.purgeLive, tc.want)
			}
		})
	}
}

func TestParseConfigSchedule(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		days     int
		policies bool
		bad      bool
	}{
		{"off", nil, 0, false, false},
		{"days", []string{"-retention-days", "30", "-retention-interval", "1h"}, 30, false, false},
		{"policies", []string{"-purge-use-policies", "-retention-interval", "1h"}, 0, true, false},
		{"days and policies refused", []string{"-retention-days", "30", "-purge-use-policies", "-retention-interval", "1h"}, 0, false, true},
		{"policies without an interval refused", []string{"-purge-use-policies"}, 0, false, true},
		{"interval alone refused", []string{"-retention-interval", "1h"}, 0, false, true},
		{"days below the floor refused", []string{"-retention-days", "6", "-retention-interval", "1h", "-min-retention-days", "7"}, 0, false, true},
		{"days at the floor", []string{"-retention-days", "7", "-retention-interval", "1h", "-min-retention-days", "7"}, 7, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseCase(t, tc.args, tc.bad)
			if !ok {
				return
			}
			if c.retentionDays != tc.days || c.usePolicies != tc.policies {
				t.Fatalf("days %d, policies %v; want %d, %v", c.retentionDays, c.usePolicies, tc.days, tc.policies)
			}
		})
	}
}

// TestAzureConnectionStringSources: the connection string, whose account
// key must not be in process listings, comes from the environment or a
// file; given on the command line it still works, with a warning.
func TestAzureConnectionStringSources(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	secret, empty := file("secret", "AccountName=fromfile;AccountKey=k\n"), file("empty", " \n")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		// want is the connection string, or with err the error naming the problem.
		want, err string
		warns     bool
	}{
		{name: "command line", args: []string{"-azure-connection-string", "AccountName=flag"}, want: "AccountName=flag", warns: true},
		{name: "METADATAD_ variable", env: map[string]string{"METADATAD_AZURE_CONNECTION_STRING": "AccountName=metadatad"}, want: "AccountName=metadatad"},
		{name: "Azure's variable", env: map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "AccountName=azure"}, want: "AccountName=azure"},
		{name: "file", args: []string{"-azure-connection-string-file", secret}, want: "AccountName=fromfile;AccountKey=k"},
		{name: "file over Azure's variable", env: map[string]string{"AZURE_STORAGE_CONNECTION_STRING": "AccountName=azure"},
			args: []string{"-azure-connection-string-file", secret}, want: "AccountName=fromfile;AccountKey=k"},
		{name: "file named by a variable", env: map[string]string{"METADATAD_AZURE_CONNECTION_STRING_FILE": secret}, want: "AccountName=fromfile;AccountKey=k"},
		{name: "file and flag", args: []string{"-azure-connection-string-file", secret, "-azure-connection-string", "AccountName=flag"}, err: "not both"},
		{name: "file and METADATAD_ variable", env: map[string]string{"METADATAD_AZURE_CONNECTION_STRING": "AccountName=metadatad"},
			args: []string{"-azure-connection-string-file", secret}, err: "not both"},
		{name: "empty file", args: []string{"-azure-connection-string-file", empty}, err: "is empty"},
		{name: "missing file", args: []string{"-azure-connection-string-file", filepath.Join(dir, "none")}, err: "-azure-connection-string-file: open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"AZURE_STORAGE_CONNECTION_STRING", "METADATAD_AZURE_CONNECTION_STRING", "METADATAD_AZURE_CONNECTION_STRING_FILE"} {
				t.Setenv(name, tc.env[name])
				if _, ok := tc.env[name]; !ok {
					os.Unsetenv(name)
				}
			}
			c, err := parseConfig(tc.args, io.Discard)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseConfig: %v, want an error naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.azure.connectionString != tc.want {
				t.Errorf("connection string %q, want %q", c.azure.connectionString, tc.want)
			}
			warned := slices.ContainsFunc(c.warnings, func(w string) bool { return strings.Contains(w, "every user of this machine (ps)") })
			if warned != tc.warns {
				t.Errorf("warnings %q; want the ps warning: %v", c.warnings, tc.warns)
			}
		})
	}
}

// TestConnectionStringWarningLogged: the daemon logs the warning of a
// connection string given on the command line, and `metadatad copy` takes
// the connection string the same ways, through the same code.
func TestConnectionStringWarningLogged(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "-azure-connection-string", "AccountName=flag")
	if !slices.ContainsFunc(d.startup, func(line string) bool {
		return strings.Contains(line, "level=WARN") && strings.Contains(line, "every user of this machine (ps)")
	}) {
		t.Errorf("no warning of the connection string on the command line:\n%s", strings.Join(d.startup, "\n"))
	}
	t.Setenv("METADATAD_AZURE_CONNECTION_STRING", "AccountName=metadatad")
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("AccountName=fromfile"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runCopy(t.Context(), []string{"-from", "azure", "-to", "embedded:" + t.TempDir(), "-azure-connection-string-file", secret}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("copy with a connection string file and $METADATAD_AZURE_CONNECTION_STRING: %v, want them refused together", err)
	}
}

func TestParseConfigStorageBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		set     bool
		bytes   uint64 // of a 1,000-byte filesystem
		refused bool
	}{
		{"off by default", nil, false, 0, false},
		{"bytes", []string{"-retention-max-bytes", "2GiB"}, true, 2 << 30, false},
		{"a share of the filesystem", []string{"-retention-max-bytes", "80%"}, true, 800, false},
		{"a share over the whole", []string{"-retention-max-bytes", "120%"}, false, 0, true},
		{"no share", []string{"-retention-max-bytes", "0%"}, false, 0, true},
		{"not a size", []string{"-retention-max-bytes", "lots"}, false, 0, true},
		{"on Azure", []string{"-retention-max-bytes", "1GiB", "-store", "azure", "-azure-connection-string", "UseDevelopmentStorage=true"}, false, 0, true},
		{"the outbox on Azure", []string{"-retention-outbox", "-store", "azure", "-azure-connection-string", "UseDevelopmentStorage=true"}, false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseCase(t, tc.args, tc.refused)
			if !ok {
				return
			}
			if got := c.retentionMaxBytes.set(); got != tc.set {
				t.Fatalf("budget set %v, want %v", got, tc.set)
			}
			if got := c.retentionMaxBytes.resolve(1000); got != tc.bytes {
				t.Errorf("budget %d bytes, want %d", got, tc.bytes)
			}
		})
	}
}

func TestParseConfigBlobDeleter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		service string
		refused bool
	}{
		{"two containers of one account", []string{"-retention-outbox", "-blob-delete-containers",
			"https://acct.blob.core.windows.net/images, https://acct.blob.core.windows.net/panos"}, "https://acct.blob.core.windows.net/", false},
		{"Azurite's path-style account", []string{"-retention-outbox", "-blob-delete-containers", "http://127.0.0.1:10000/devstoreaccount1/images"},
			"http://127.0.0.1:10000/devstoreaccount1/", false},
		{"on Azure", []string{"-store", "azure", "-azure-connection-string", "UseDevelopmentStorage=true", "-retention-outbox",
			"-blob-delete-containers", "https://acct.blob.core.windows.net/images"}, "https://acct.blob.core.windows.net/", false},
		{"without the outbox", []string{"-blob-delete-containers", "https://acct.blob.core.windows.net/images"}, "", true},
		{"two accounts", []string{"-retention-outbox", "-blob-delete-containers",
			"https://a.blob.core.windows.net/images,https://b.blob.core.windows.net/images"}, "", true},
		{"no container", []string{"-retention-outbox", "-blob-delete-containers", "https://acct.blob.core.windows.net/"}, "", true},
		{"not a URL", []string{"-retention-outbox", "-blob-delete-containers", "images"}, "", true},
		{"no pace", []string{"-retention-outbox", "-blob-delete-containers", "https://acct.blob.core.windows.net/images", "-blob-delete-per-second", "0"}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseCase(t, tc.args, tc.refused)
			if !ok {
				return
			}
			if got, err := blobServiceURL(c.blobDelete.containers); err != nil || got != tc.service {
				t.Errorf("service %q, %v; want %q", got, err, tc.service)
			}
		})
	}
}
