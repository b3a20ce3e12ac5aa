package deadlinegrpc_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// A method that takes about 2 s refuses at once an RPC sent with 1 s left:
// its earlier RPCs (recorded here by hand; the server records every unary
// RPC it admits) say it would very likely not finish. (The client's 1 s is
// also its wait for the refusal: with 50 ms, a loaded machine could spend
// it on connecting, and the client ended the call before the refusal came.)
func ExampleWithLearnedAdmission() {
	rec := &learn.Recorder{}
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 10 * time.Second, MinSamples: 100}})
	if err != nil {
		panic(err)
	}
	for range 100 {
		rec.Record("/deadlinegrpc.test.Echo/Get", deadline.EndedCompleted, 2*time.Second, time.Now())
	}
	server, err := deadlinegrpc.NewServer(
		deadlinegrpc.WithLearnedAdmission(admission.Learned{Recorder: rec, Estimator: live, Threshold: 0.05}),
		deadlinegrpc.WithAdmissionQueue(64, 256))
	if err != nil {
		panic(err)
	}
	s := grpc.NewServer(server.ServerOptions()...)
	s.RegisterService(&echoDesc, &echo{})
	lis := bufconn.Listen(1 << 16)
	go s.Serve(lis)
	defer s.Stop()
	cc, err := grpc.NewClient("passthrough:///example", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		panic(err)
	}
	defer cc.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var trailer metadata.MD
	err = cc.Invoke(ctx, "/deadlinegrpc.test.Echo/Get", wrapperspb.String("x"), new(wrapperspb.StringValue), grpc.Trailer(&trailer), grpc.WaitForReady(true))
	refused := trailer.Get(deadlinegrpc.RefusedTrailer) // "budget-ms=999, floor-ms=0, reason=learned"
	fmt.Println(status.Code(err), len(refused) == 1 && strings.HasSuffix(refused[0], "reason=learned"))
	// Output:
	// DeadlineExceeded true
}
