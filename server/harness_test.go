package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/server/auth"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/pebble/backup"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/drivers"
	"github.com/metadatad/metadatad/store/retention/queue"
)

// backend is a named factory of the store the suite runs the server on.
// Every test that does not depend on one engine runs once per entry, so a
// second backend joins the suite by adding a line here.
type backend struct {
	name string
	open func(t *testing.T) store.Backend
}

var backends = []backend{
	{name: "pebble", open: openMemPebble},
	{name: "azure", open: func(t *testing.T) store.Backend { return openAzure(t) }},
}

func TestMain(m *testing.M) { os.Exit(azurite.Main(m)) }

// openAzure opens Azure Table Storage on Azurite, with tables of the test's
// own: a random prefix keeps tests on the shared emulator apart.
func openAzure(t testing.TB) store.Backend {
	t.Helper()
	var id [5]byte
	_, _ = rand.Read(id[:])
	b, err := aztable.Open(t.Context(), aztable.Options{
		ConnectionString: azurite.Require(t), TablePrefix: "t" + hex.EncodeToString(id[:]),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("open Azure tables: %v", err)
	}
	return b
}

// openMemPebble opens the real embedded engine on an in-memory filesystem,
// closed when the test ends.
func openMemPebble(t *testing.T) store.Backend {
	t.Helper()
	db, _ := openPebble(t, pebble.Options{Dir: "db", FS: vfs.NewMem()})
	return db
}

// openPebble opens a pebble DB and returns it with its close function,
// which the test may call; the DB is closed when the test ends otherwise.
func openPebble(t testing.TB, opts pebble.Options) (*pebble.DB, func() error) {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := pebble.Open(opts)
	if err != nil {
		t.Fatalf("open pebble: %v", err)
	}
	closeDB := sync.OnceValue(db.Close)
	t.Cleanup(func() {
		if err := closeDB(); err != nil {
			t.Errorf("close pebble: %v", err)
		}
	})
	return db, closeDB
}

// forEachBackend runs test once per backend, each in its own subtest.
func forEachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b) })
	}
}

// forEachServer runs test once per backend against a fresh server on it.
func forEachServer(t *testing.T, test func(t *testing.T, h *harness)) {
	t.Helper()
	forEachBackend(t, func(t *testing.T, b backend) { test(t, startServer(t, b.open(t))) })
}

// harness is a running server reached over an in-process gRPC connection.
type harness struct {
	backend   store.Backend
	srv       *server.Server
	conn      *grpc.ClientConn
	single    metadatav1.SingleImageMetadataServiceClient
	pano      metadatav1.PanoImageMetadataServiceClient
	preStitch metadatav1.PreStitchImageMetadataServiceClient
	retention metadatav1.RetentionServiceClient
	// video, devices and acquisition reach the control plane's services.
	video       metadatav1.VideoMetadataServiceClient
	devices     metadatav1.DeviceStateServiceClient
	acquisition metadatav1.AcquisitionInstanceServiceClient
	// clock is the control plane's clock.
	clock *testClock
	// logs holds everything the server logged.
	logs *logBuffer
	// indexLag is the image repositories' IndexLag: how long a purge leaves
	// a new index row alone (0 where creates are transactions).
	indexLag time.Duration

	lis          *bufconn.Listener
	served       chan error
	stopPurges   func()
	shutdownOnce sync.Once
}

// startServer serves the three image services, the RetentionService and
// the control plane's services (video, device state, acquisition instances,
// on h.clock) on backend through server.New, so every call runs through the
// real interceptor chain, and dials it over bufconn. The server and its
// purge engine stop when the test ends.
func startServer(t *testing.T, backend store.Backend) *harness {
	t.Helper()
	return startServerWith(t, backend, true)
}

// startServerWith is startServer with the choice of running the purge
// engine: without it, started purges stay pending, holding their locks.
func startServerWith(t *testing.T, backend store.Backend, runPurges bool) *harness {
	t.Helper()
	return startServerOpts(t, backend, serverOpts{runPurges: runPurges})
}

// serverOpts are the choices startServerOpts leaves to a test.
type serverOpts struct {
	runPurges        bool
	minRetentionDays int32
	// schedule is server.Options' RetentionSchedule.
	schedule retention.Schedule
	// tracerProvider traces the calls; nil leaves tracing out.
	tracerProvider trace.TracerProvider
	// auth and openReflection are server.Options' Auth and OpenReflection.
	auth           *auth.Authenticator
	openReflection bool
	// creds are server.Options' Credentials; h.conn then dials with
	// insecure credentials, and tests dial their own with h.dial.
	creds credentials.TransportCredentials
	// limits are server.Options' Limits.
	limits server.Limits
	// now is the purge engine's clock; nil means time.Now.
	now func() time.Time
	// backups are server.Options' Backups.
	backups *backup.Source
	// watch is server.Options' Watch.
	watch server.WatchOptions
	// budgetCheck is server.Options' BudgetCheck.
	budgetCheck func() error
	// outbox is the engine's Options.Outbox.
	outbox bool
	// traffic is server.Options' Traffic.
	traffic *server.Traffic
}

// Bounds of the creates in these tests, on backends without transactions:
// short, so that a purge waits little for its rows to settle (seedMinutes),
// yet far above a create's time on Azurite, even on a loaded machine.
const (
	testCreateTimeout = 10 * time.Second
	testLandingMargin = time.Millisecond
)

func startServerOpts(t testing.TB, backend store.Backend, o serverOpts) *harness {
	t.Helper()
	runPurges := o.runPurges
	repos := make(map[images.Kind]*images.Repository, len(images.Kinds))
	for _, kind := range images.Kinds {
		repo, err := images.Open(t.Context(), backend, images.Options{Kind: kind, CreateTimeout: testCreateTimeout, LandingMargin: testLandingMargin})
		if err != nil {
			t.Fatalf("open %s repository: %v", kind, err)
		}
		repos[kind] = repo
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	engine, err := retention.Open(t.Context(), retention.Options{
		Backend: backend, Repositories: []*images.Repository{repos[images.Single], repos[images.Pano], repos[images.PreStitch]},
		Logger: logger, PollInterval: 5 * time.Millisecond, Now: o.now, Outbox: o.outbox,
		Driver: drivers.For(backend, queue.Options{VisibilityTimeout: 100 * time.Millisecond}),
	})
	if err != nil {
		t.Fatalf("retention.Open: %v", err)
	}
	stopPurges := func() {}
	if runPurges {
		ctx, stop := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- engine.Run(ctx) }()
		stopPurges = func() {
			stop()
			if err := <-ran; err != nil {
				t.Errorf("purge engine: %v", err)
			}
		}
	}
	clock := &testClock{now: base}
	control := openControlPlane(t, backend, clock)
	srv, err := server.New(server.Options{
		Fleet:       harnessFleet(t, backend, repos),
		Single:      repos[images.Single],
		Pano:        repos[images.Pano],
		PreStitch:   repos[images.PreStitch],
		Retention:   engine,
		Video:       control.video,
		Devices:     control.devices,
		Acquisition: control.acquisition,
		Logger:      logger,
		AccessLog:   1, // tests read the lines of successful calls

		MinRetentionDays: o.minRetentionDays, RetentionSchedule: o.schedule,
		TracerProvider: o.tracerProvider, BudgetCheck: o.budgetCheck,
		Auth:           o.auth,
		OpenReflection: o.openReflection,
		Credentials:    o.creds,
		Limits:         o.limits,
		Backups:        o.backups,
		Watch:          o.watch,
		Traffic:        o.traffic,
	})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	lis := bufconn.Listen(1 << 20)
	h := &harness{backend: backend, srv: srv, lis: lis, clock: clock, logs: logs, served: make(chan error, 1), stopPurges: stopPurges,
		indexLag: repos[images.Single].IndexLag()}
	go func() { h.served <- srv.Serve(lis) }()
	t.Cleanup(func() { h.shutdown(t, context.Background()) })
	conn := h.dial(t, insecure.NewCredentials())
	h.conn = conn
	h.single = metadatav1.NewSingleImageMetadataServiceClient(conn)
	h.pano = metadatav1.NewPanoImageMetadataServiceClient(conn)
	h.preStitch = metadatav1.NewPreStitchImageMetadataServiceClient(conn)
	h.retention = metadatav1.NewRetentionServiceClient(conn)
	h.video = metadatav1.NewVideoMetadataServiceClient(conn)
	h.devices = metadatav1.NewDeviceStateServiceClient(conn)
	h.acquisition = metadatav1.NewAcquisitionInstanceServiceClient(conn)
	return h
}

// dial opens a new connection to the server with creds, closed when the
// test ends.
func (h *harness) dial(t testing.TB, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return h.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatalf("dial bufconn: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// shutdown stops the server once and checks that Serve returned cleanly.
func (h *harness) shutdown(t testing.TB, ctx context.Context) {
	t.Helper()
	h.shutdownOnce.Do(func() {
		h.srv.Shutdown(ctx)
		if err := <-h.served; err != nil {
			t.Errorf("Serve returned %v after Shutdown, want nil", err)
		}
		// The engine stops after the server and before the test closes the store.
		h.stopPurges()
	})
}

// tableNames are the tables the repositories write: the six of the three
// image kinds, then the control plane's.
func tableNames() []string {
	var names []string
	for _, kind := range images.Kinds {
		names = append(names, kind.DefaultTable(), images.IndexTable(kind.DefaultTable()))
	}
	return append(names, controlPlaneTables...)
}

// rows reads every row of a table through the backend, in key order.
func (h *harness) rows(t *testing.T, table string) []store.Entity {
	t.Helper()
	tbl, err := h.backend.Table(t.Context(), table)
	if err != nil {
		t.Fatalf("open table %s: %v", table, err)
	}
	var all []store.Entity
	scan := store.Scan{}
	for {
		page, err := tbl.Scan(t.Context(), scan)
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		all = append(all, page.Entities...)
		if page.Next == nil {
			return all
		}
		scan.Resume = page.Next
	}
}

// snapshot is every row of every table, keyed by table name.
func (h *harness) snapshot(t *testing.T) map[string][]store.Entity {
	t.Helper()
	snap := make(map[string][]store.Entity)
	for _, name := range tableNames() {
		snap[name] = h.rows(t, name)
	}
	return snap
}

// requireUnchanged fails unless every table holds exactly the rows of
// before, each at the same version: nothing was written.
func (h *harness) requireUnchanged(t *testing.T, before map[string][]store.Entity) {
	t.Helper()
	h.compareSnapshot(t, before, true)
}

// requireSameRows fails unless every table holds the rows of before with the
// same properties. Unlike requireUnchanged it allows a row rewritten with
// its own content, as a backend without transactions does to the index row
// of a repeated create.
func (h *harness) requireSameRows(t *testing.T, before map[string][]store.Entity) {
	t.Helper()
	h.compareSnapshot(t, before, false)
}

func (h *harness) compareSnapshot(t *testing.T, before map[string][]store.Entity, versions bool) {
	t.Helper()
	for name, after := range h.snapshot(t) {
		if !slices.EqualFunc(before[name], after, func(a, b store.Entity) bool {
			return a.PartitionKey == b.PartitionKey && a.RowKey == b.RowKey && (!versions || a.ETag == b.ETag) &&
				store.EqualProperties(a.Properties, b.Properties)
		}) {
			t.Errorf("table %s changed:\nbefore %s\nafter  %s", name, rowKeys(before[name]), rowKeys(after))
		}
	}
}

// rowKeys lists the keys of rows as partition/row, for messages.
func rowKeys(rows []store.Entity) string {
	keys := make([]string, len(rows))
	for i, e := range rows {
		keys[i] = e.PartitionKey + "/" + e.RowKey
	}
	return "[" + strings.Join(keys, " ") + "]"
}

// logBuffer collects log output written from the server's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// requireCode fails unless err is a gRPC status with the code, and returns it.
func requireCode(t *testing.T, err error, want codes.Code) *status.Status {
	t.Helper()
	if err == nil {
		t.Fatalf("call succeeded, want %v", want)
	}
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a gRPC status", err)
	}
	if st.Code() != want {
		t.Fatalf("code %v (%q), want %v", st.Code(), st.Message(), want)
	}
	return st
}

// requireFieldViolation fails unless err is INVALID_ARGUMENT carrying a
// google.rpc.BadRequest with a violation of field.
func requireFieldViolation(t *testing.T, err error, field string) {
	t.Helper()
	st := requireCode(t, err, codes.InvalidArgument)
	var fields []string
	for _, d := range st.Details() {
		br, ok := d.(*errdetails.BadRequest)
		if !ok {
			continue
		}
		for _, v := range br.GetFieldViolations() {
			if v.GetField() == field {
				if v.GetDescription() == "" {
					t.Errorf("violation of %s has no description", field)
				}
				return
			}
			fields = append(fields, v.GetField())
		}
	}
	if fields == nil {
		t.Fatalf("INVALID_ARGUMENT %q carries no google.rpc.BadRequest field violation; details %v", st.Message(), st.Details())
	}
	t.Fatalf("field violations name %q, want %q (message %q)", fields, field, st.Message())
}

// requireOK fails on a call error.
func requireOK(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
