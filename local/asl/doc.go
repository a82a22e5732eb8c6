// Package asl is the project's interpreter of the Amazon States Language
// (JSONPath and JSONata query languages, workflow variables), pure Go with
// no AWS types; JSONata is evaluated by github.com/blues/jsonata-go.
//
// It covers the states and features healthlake-cdc's definition uses,
// faithful to the specification for those: Task, Choice, Pass, Wait,
// Succeed, Fail, Map (INLINE and DISTRIBUTED with an S3 JSON ItemReader, an
// ItemBatcher and an S3 ResultWriter) and Parallel; input and output processing in the
// specification's order (InputPath, Parameters/ItemSelector, the task,
// ResultSelector, ResultPath, OutputPath); the context object $$; intrinsic
// functions; Retry and Catch; task timeouts and heartbeats; the callback
// (waitForTaskToken) pattern; the 256 KiB payload limit
// (States.DataLimitExceeded); the machine's TimeoutSeconds and the 5-minute
// limit of EXPRESS executions (TIMED_OUT with States.Timeout). Task resources, S3 objects and task tokens are
// reached through the TaskRunner, ObjectStore and Tokens seams, so the
// interpreter runs the same way under tests and under the Step Functions
// emulator (local/fakesfn).
//
// A Clock and a time scale let tests and cdc-local run Wait states, retry
// intervals, heartbeats and timeouts fast; every execution keeps a complete
// history of events and counts its state transitions.
package asl
