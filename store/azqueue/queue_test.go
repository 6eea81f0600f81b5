package azqueue_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	sdkqueue "github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store/azqueue"
	"github.com/metadatad/metadatad/store/tablequeue"
)

func TestMain(m *testing.M) { os.Exit(azurite.Main(m)) }

// open returns a fresh queue of its own on the emulator, with the
// connection string and the queue's name.
func open(t *testing.T) (*azqueue.Queue, string, string) {
	t.Helper()
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := "test-" + hex.EncodeToString(suffix[:])
	conn := azurite.Require(t)
	q, err := azqueue.Open(t.Context(), azqueue.Options{ConnectionString: conn, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return q, conn, name
}

func receiveOne(t *testing.T, q *azqueue.Queue, visibility time.Duration) tablequeue.Message {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		msgs, err := q.Receive(t.Context(), 1, visibility)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 {
			return msgs[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no message became visible within 30s")
	return tablequeue.Message{}
}

func TestSendReceiveDelete(t *testing.T) {
	q, _, _ := open(t)
	for i := range 3 {
		if err := q.Send(t.Context(), []byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := q.Receive(t.Context(), 10, time.Minute)
	if err != nil || len(msgs) != 3 {
		t.Fatalf("receive: %d messages, %v; want 3", len(msgs), err)
	}
	for _, m := range msgs {
		if m.DequeueCount != 1 || !strings.HasPrefix(string(m.Body), `{"n":`) {
			t.Errorf("message %+v", m)
		}
	}
	if again, err := q.Receive(t.Context(), 10, time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("messages in flight delivered again: %d, %v", len(again), err)
	}
	for _, m := range msgs {
		if err := q.Delete(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		if err := q.Delete(t.Context(), m); err != nil {
			t.Fatalf("second delete: %v, want nil", err)
		}
	}
}

// TestRedeliveryAfterVisibilityTimeout: a message not deleted in time comes
// back with a higher dequeue count, and only its latest receiver may delete it.
func TestRedeliveryAfterVisibilityTimeout(t *testing.T) {
	q, _, _ := open(t)
	if err := q.Send(t.Context(), []byte("task")); err != nil {
		t.Fatal(err)
	}
	first := receiveOne(t, q, time.Second)
	second := receiveOne(t, q, time.Minute)
	if second.ID != first.ID || second.DequeueCount != 2 {
		t.Fatalf("redelivered %+v after %+v", second, first)
	}
	if err := q.Delete(t.Context(), first); !errors.Is(err, tablequeue.ErrLostMessage) {
		t.Fatalf("delete with the first receipt: %v, want ErrLostMessage", err)
	}
	if err := q.Delete(t.Context(), second); err != nil {
		t.Fatal(err)
	}
}

// TestExtendKeepsAMessageHidden: a receiver extending its message every
// half second keeps it hidden for three times its 1 s visibility timeout;
// the receipt before an extension, and a receiver that lost the message,
// are refused.
func TestExtendKeepsAMessageHidden(t *testing.T) {
	q, _, _ := open(t)
	if err := q.Send(t.Context(), []byte("slow")); err != nil {
		t.Fatal(err)
	}
	first := receiveOne(t, q, time.Second)
	held := first
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); {
		time.Sleep(500 * time.Millisecond)
		extended, err := q.Extend(t.Context(), held, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if extended.Receipt == held.Receipt || extended.ID != held.ID {
			t.Fatalf("extended %+v from %+v, want the same message with a new receipt", extended, held)
		}
		held = extended
		if msgs, err := q.Receive(t.Context(), 1, time.Minute); err != nil || len(msgs) != 0 {
			t.Fatalf("an extended message was delivered again: %d, %v", len(msgs), err)
		}
	}
	if err := q.Delete(t.Context(), first); !errors.Is(err, tablequeue.ErrLostMessage) {
		t.Fatalf("delete with the receipt before the extension: %v, want ErrLostMessage", err)
	}
	taker := receiveOne(t, q, time.Minute)
	if taker.ID != first.ID || taker.DequeueCount != 2 {
		t.Fatalf("after the extensions stopped: %+v, want the message delivered a second time", taker)
	}
	if _, err := q.Extend(t.Context(), held, time.Second); !errors.Is(err, tablequeue.ErrLostMessage) {
		t.Fatalf("extension by the receiver that lost it: %v, want ErrLostMessage", err)
	}
	if err := q.Delete(t.Context(), taker); err != nil {
		t.Fatal(err)
	}
}

func TestDeadLetter(t *testing.T) {
	q, conn, name := open(t)
	if err := q.Send(t.Context(), []byte("poison")); err != nil {
		t.Fatal(err)
	}
	m := receiveOne(t, q, time.Minute)
	if err := q.DeadLetter(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	if msgs, err := q.Receive(t.Context(), 10, time.Minute); err != nil || len(msgs) != 0 {
		t.Fatalf("dead-lettered message still delivered: %d, %v", len(msgs), err)
	}
	// The poison queue is <name>-poison; open it as a queue of its own.
	poison, err := azqueue.Open(context.Background(), azqueue.Options{ConnectionString: conn, Name: name + "-poison"})
	if err != nil {
		t.Fatal(err)
	}
	got := receiveOne(t, poison, time.Minute)
	if string(got.Body) != "poison" {
		t.Fatalf("poison queue holds %q", got.Body)
	}
}

func TestOversizedMessageRefused(t *testing.T) {
	q, _, _ := open(t)
	err := q.Send(t.Context(), make([]byte, azqueue.MaxMessageBytes+1))
	if !errors.Is(err, azqueue.ErrMessageTooLarge) {
		t.Fatalf("oversized send: %v", err)
	}
}

func TestBadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts azqueue.Options
	}{
		{"nothing", azqueue.Options{Name: "q-one"}},
		{"both", azqueue.Options{Name: "q-one", ConnectionString: "x", ServiceURL: "https://a.queue.core.windows.net"}},
		{"malformed connection string", azqueue.Options{Name: "q-one", ConnectionString: "AccountKey=c2VjcmV0;nonsense"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := azqueue.Open(t.Context(), tc.opts)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "c2VjcmV0") {
				t.Fatalf("error %q quotes the account key", err)
			}
		})
	}
}

func TestDepth(t *testing.T) {
	q, _, _ := open(t)
	for i := range 3 {
		if err := q.Send(t.Context(), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	m := receiveOne(t, q, time.Minute)
	if n, err := q.Depth(t.Context()); err != nil || n != 3 {
		t.Errorf("Depth = %d, %v; want 3, the message in flight included", n, err)
	}
	if err := q.DeadLetter(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Depth(t.Context()); err != nil || n != 2 {
		t.Errorf("Depth = %d, %v; want 2 after a dead letter", n, err)
	}
}

// TestDeadLetterLivesPoisonTTL checks that a dead letter expires
// Options.PoisonTTL after it was dead-lettered, and that without one it
// never does.
func TestDeadLetterLivesPoisonTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		want time.Duration // 0: never expires
	}{{"two hours", 2 * time.Hour, 2 * time.Hour}, {"for ever", 0, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			_, conn, name := open(t)
			q, err := azqueue.Open(t.Context(), azqueue.Options{ConnectionString: conn, Name: name, PoisonTTL: tc.ttl})
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Send(t.Context(), []byte("poison")); err != nil {
				t.Fatal(err)
			}
			if err := q.DeadLetter(t.Context(), receiveOne(t, q, time.Minute)); err != nil {
				t.Fatal(err)
			}
			service, err := sdkqueue.NewServiceClientFromConnectionString(conn, nil)
			if err != nil {
				t.Fatal(err)
			}
			peeked, err := service.NewQueueClient(name+"-poison").PeekMessages(t.Context(), nil)
			if err != nil || len(peeked.Messages) != 1 {
				t.Fatalf("poison queue: %+v, %v; want one message", peeked.Messages, err)
			}
			m := peeked.Messages[0]
			lives := m.ExpirationTime.Sub(*m.InsertionTime)
			switch {
			case tc.want > 0 && lives != tc.want:
				t.Errorf("dead letter lives %s, want %s", lives, tc.want)
			case tc.want == 0 && lives < 100*365*24*time.Hour:
				t.Errorf("dead letter lives %s, want for ever", lives)
			}
		})
	}
}
