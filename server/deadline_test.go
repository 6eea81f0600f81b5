package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// TestDefaultDeadline: a unary call without a deadline gets the server's
// default; a client's own deadline stands.
func TestDefaultDeadline(t *testing.T) {
	l := Limits{DefaultDeadline: time.Minute}
	l.fill()
	c := newCallLimits(l)
	clients, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want time.Duration
	}{
		{"none", context.Background(), time.Minute},
		{"the client's", clients, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := c.unary(tc.ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/metadata.v1.RetentionService/ListPurges"},
				func(ctx context.Context, _ any) (any, error) {
					d, ok := ctx.Deadline()
					if !ok {
						t.Fatal("the handler's context has no deadline")
					}
					if left := d.Sub(start); left > tc.want+time.Second || left < tc.want-5*time.Second {
						t.Errorf("deadline %v away, want about %v", left, tc.want)
					}
					return nil, nil
				})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
