// Command consumer is an example healthlake-cdc consumer: it keeps a local
// replica of the HealthLake data store (one JSON file per resource) from the
// events an EventBridge rule sends to an SQS queue. See docs/CONSUMERS.md.
//
//	CONSUMER_QUEUE_URL=… CONSUMER_REPLICA_DIR=./replica go run ./examples/consumer [--drain]
//
// --drain stops once the queue has no visible message; otherwise it polls
// until interrupted. On exit it prints its counts as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/healthlake-cdc/healthlake-cdc/examples/consumer/sqsconsumer"
)

func main() {
	drain := flag.Bool("drain", false, "stop once the queue has no visible message")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	c, err := sqsconsumer.NewFromEnv(ctx, os.Getenv, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(2)
	}
	run := c.Run
	if *drain {
		run = c.Drain
	}
	st, err := run(ctx)
	_ = json.NewEncoder(os.Stdout).Encode(st)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}
