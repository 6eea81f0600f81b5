package retentiontest

import (
	"testing"
	"testing/synctest"
)

// mode is a harness as the scenarios' gates know it: a driver on a backend.
type mode int

const (
	pebbleMode      mode = 1 << iota // the embedded driver on Pebble
	pebbleQueueMode                  // the queue design on Pebble
	azureMode                        // the queue design on Azurite
)

// Gates: the modes a scenario runs in. daemon is each backend with the
// driver the daemon runs on it; queued the queue design's; inMemory the
// stores that crash by copy and run in synctest bubbles.
const (
	daemon   = pebbleMode | azureMode
	queued   = pebbleQueueMode | azureMode
	inMemory = pebbleMode | pebbleQueueMode
	every    = pebbleMode | pebbleQueueMode | azureMode
)

// suite is the harness a scenario runs on.
type suite struct{ h Harness }

// open opens a fixture on the harness's backend.
func (ts *suite) open(t *testing.T, opts Options) *Fixture {
	t.Helper()
	return Open(t, ts.h, opts)
}

// openInBubble opens a fixture for a test in a synctest bubble.
func (ts *suite) openInBubble(t *testing.T, opts Options) *Fixture {
	t.Helper()
	return OpenInBubble(t, ts.h, opts)
}

// each runs test with the harness's opener.
func (ts *suite) each(t *testing.T, test func(t *testing.T, open func(*testing.T, Options) *Fixture)) {
	test(t, ts.open)
}

// eachInBubble is each for tests whose subject is time (visibility
// timeouts, leases): on Pebble the test runs in a synctest bubble, where
// its waits are virtual and cost no wall-clock time; Azurite is a real
// process, so there the test waits for real.
func (ts *suite) eachInBubble(t *testing.T, test func(t *testing.T, open func(*testing.T, Options) *Fixture)) {
	if ts.h.Backend == Pebble {
		synctest.Test(t, func(t *testing.T) { test(t, ts.openInBubble) })
		return
	}
	test(t, ts.open)
}

// scenario is one test of the suite and the modes it runs in.
type scenario struct {
	name  string
	modes mode
	test  func(*testing.T, *suite)
}

// Run runs every scenario of the suite that applies to h's driver and
// backend, one named subtest each, so that a failure names the behaviour
// it breaks and -run selects one.
func Run(t *testing.T, h Harness) {
	ts := &suite{h: h}
	for _, s := range scenarios {
		if s.modes&h.mode() != 0 {
			t.Run(s.name, func(t *testing.T) { s.test(t, ts) })
		}
	}
}

// scenarios are the suite's tests: behaviours every driver keeps (daemon,
// every), the queue design's (queued), and those of a store that crashes
// by copy and runs on virtual time (inMemory, pebbleMode).
var scenarios = []scenario{
	{"PurgeRetiresExactlyTheExpired", every, testPurgeRetiresExactlyTheExpired},
	{"DryRunDeletesNothing", daemon, testDryRunDeletesNothing},
	{"OverlappingPurgeIsRefused", daemon, testOverlappingPurgeIsRefused},
	{"PurgeShardedIndex", daemon, testPurgeShardedIndex},
	{"FleetIndexKeysArePurged", daemon, testFleetIndexKeysArePurged},
	{"StatsAndStatus", daemon, testStatsAndStatus},
	{"RowsDeletedAdvanceAsThePurgeRuns", every, testRowsDeletedAdvanceAsThePurgeRuns},
	{"FailedStartNeverRuns", daemon, testFailedStartNeverRuns},
	{"FailedCleanupIsLogged", pebbleMode, testFailedCleanupIsLogged},
	{"CancelRefusals", pebbleMode, testCancelRefusals},
	{"CrashAtAnyWriteResumesExactly", daemon, testCrashAtAnyWriteResumesExactly},
	{"CrashAtAnyWriteOfTheQueueDesignResumesExactly", pebbleQueueMode, testCrashAtAnyWriteOfTheQueueDesignResumesExactly},
	{"CrashAtAnyWriteOfAnEmbeddedPurgeResumesExactly", pebbleMode, testCrashAtAnyWriteOfAnEmbeddedPurgeResumesExactly},
	{"CrashAtAnyWriteWithPoliciesResumesExactly", daemon, testCrashAtAnyWriteWithPoliciesResumesExactly},
	{"CrashAtAnyWriteWhileThinningResumesExactly", inMemory, testCrashAtAnyWriteWhileThinningResumesExactly},
	{"ScheduleStartsPurges", pebbleMode, testScheduleStartsPurges},
	{"PausedScheduleStartsNothing", pebbleMode | azureMode, testPausedScheduleStartsNothing},
	{"SlowPrimaryWriteKeepsItsIndexRow", pebbleQueueMode, testSlowPrimaryWriteKeepsItsIndexRow},
	{"AHoldHoldsAgainstEveryPurge", daemon, testAHoldHoldsAgainstEveryPurge},
	{"TheScheduleSparesAHold", pebbleMode, testTheScheduleSparesAHold},
	{"AHoldPlacedDuringAPurgeSparesTheCamerasNotBegun", every, testAHoldPlacedDuringAPurgeSparesTheCamerasNotBegun},
	{"PurgeWithPolicies", daemon, testPurgeWithPolicies},
	{"ScheduleWithPolicies", pebbleMode, testScheduleWithPolicies},
	{"PrefixPolicyBound", pebbleMode, testPrefixPolicyBound},
	{"ThinningKeepsOnePerInterval", every, testThinningKeepsOnePerInterval},
	{"ThinningTakesALateImage", every, testThinningTakesALateImage},
	{"OutboxRefusesAPositionAheadOfIt", every, testOutboxRefusesAPositionAheadOfIt},
	{"ARestoredOutboxRefusesThePositionsItLost", pebbleMode, testARestoredOutboxRefusesThePositionsItLost},
	{"OutboxRetiresWithTheJobs", every, testOutboxRetiresWithTheJobs},
	{"CreatesAndPurgesSurviveFaults", azureMode, testCreatesAndPurgesSurviveFaults},
	{"EmbeddedPurgeIsASpan", pebbleMode, testEmbeddedPurgeIsASpan},
	{"EmbeddedPurgeWithPoliciesInSections", pebbleMode, testEmbeddedPurgeWithPoliciesInSections},
	{"EmbeddedPurgeRunsWithoutTheQueue", pebbleMode, testEmbeddedPurgeRunsWithoutTheQueue},
	{"EmbeddedDryRunCountsWhatThePurgeDeletes", pebbleMode, testEmbeddedDryRunCountsWhatThePurgeDeletes},
	{"EmbeddedLateOldImagesAreWhollyBeforeOrAfter", pebbleMode, testEmbeddedLateOldImagesAreWhollyBeforeOrAfter},
	{"EmbeddedPurgeThatCannotCommitFailsAndFreesItsKinds", pebbleMode, testEmbeddedPurgeThatCannotCommitFailsAndFreesItsKinds},
	{"EmbeddedCancelAfterSomeSectionsLeavesNoOrphan", pebbleMode, testEmbeddedCancelAfterSomeSectionsLeavesNoOrphan},
	{"EmbeddedCancelledThenRestartedDeletesItsOrphans", pebbleMode, testEmbeddedCancelledThenRestartedDeletesItsOrphans},
	{"EmbeddedPurgeFailingAtAnySectionCountsWhatItDeleted", pebbleMode, testEmbeddedPurgeFailingAtAnySectionCountsWhatItDeleted},
	{"EmbeddedCountsEachCameraOnce", pebbleMode, testEmbeddedCountsEachCameraOnce},
	{"IndexRowGoesOnlyAfterItsPrimary", queued, testIndexRowGoesOnlyAfterItsPrimary},
	{"FailedCameraIsCountedAndRetried", queued, testFailedCameraIsCountedAndRetried},
	{"CountsIncludeExpiredCreatesDuringThePurge", queued, testCountsIncludeExpiredCreatesDuringThePurge},
	{"UnrecordedDeleteFlagsItsCount", queued, testUnrecordedDeleteFlagsItsCount},
	{"CancelStopsAtATaskBoundary", queued, testCancelStopsAtATaskBoundary},
	{"CancelPurgeWithPolicies", queued, testCancelPurgeWithPolicies},
	{"CancelFinishesARedeliveredTask", queued, testCancelFinishesARedeliveredTask},
	{"CancelCountsATaskThatEndsWhileSettling", queued, testCancelCountsATaskThatEndsWhileSettling},
	{"WorkersDeleteIndexRowsInBothKeyForms", queued, testWorkersDeleteIndexRowsInBothKeyForms},
	{"LateOldImageIsWhollyPurgedOrWhollyKept", queued, testLateOldImageIsWhollyPurgedOrWhollyKept},
	{"CamerasBeyondThePlansMemory", queued, testCamerasBeyondThePlansMemory},
	{"OldOwnerStopsOnceItsLeaseIsTaken", queued, testOldOwnerStopsOnceItsLeaseIsTaken},
	{"CameraFailingEveryAttemptEndsItsJob", queued, testCameraFailingEveryAttemptEndsItsJob},
	{"PolicyChangesDuringPurge", queued, testPolicyChangesDuringPurge},
	{"PolicyRemovedBeforeThePlanReachesTheCamera", queued, testPolicyRemovedBeforeThePlanReachesTheCamera},
	{"TwoReplicasShareAPurge", queued, testTwoReplicasShareAPurge},
	{"ReplicaTakesOverAStalledJob", queued, testReplicaTakesOverAStalledJob},
	{"OldJobsAreRetired", queued, testOldJobsAreRetired},
	{"OldDeadLettersAreRetired", pebbleQueueMode, testOldDeadLettersAreRetired},
	{"RecreatedRowGoesWithItsIndexRow", queued, testRecreatedRowGoesWithItsIndexRow},
	{"RewrittenOrphanSurvivesTheJanitor", queued, testRewrittenOrphanSurvivesTheJanitor},
	{"JanitorDeletesOnlySettledOrphans", queued, testJanitorDeletesOnlySettledOrphans},
	{"SlowTaskIsWorkedOnce", queued, testSlowTaskIsWorkedOnce},
	{"SecondMessageOfARunningTaskIsNotWorkedBesideIt", queued, testSecondMessageOfARunningTaskIsNotWorkedBesideIt},
	{"TaskBackWhileItRunsWaits", queued, testTaskBackWhileItRunsWaits},
	{"AStalledDeliveryIsFencedByItsJobsEnd", pebbleQueueMode, testAStalledDeliveryIsFencedByItsJobsEnd},
	{"ARowRewrittenMidBatchIsCountedOnce", pebbleQueueMode, testARowRewrittenMidBatchIsCountedOnce},
	{"PurgePhasesAreSpans", pebbleQueueMode, testPurgePhasesAreSpans},
	{"CameraDeleteTakesEveryImageOfOneCamera", every, testCameraDeleteTakesEveryImageOfOneCamera},
	{"CameraDeleteDryRunDeletesNothing", daemon, testCameraDeleteDryRunDeletesNothing},
	{"DeletesOfAHeldCameraAreRefused", daemon, testDeletesOfAHeldCameraAreRefused},
	{"CameraDeleteTakesNoCutoff", pebbleMode, testCameraDeleteTakesNoCutoff},
	{"CameraDeleteCancelled", daemon, testCameraDeleteCancelled},
	{"CrashAtAnyWriteOfACameraDeleteResumesExactly", inMemory, testCrashAtAnyWriteOfACameraDeleteResumesExactly},
	{"AHoldPlacedDuringACameraDeleteKeepsTheRest", daemon, testAHoldPlacedDuringACameraDeleteKeepsTheRest},
	{"DeleteOneImage", every, testDeleteOneImage},
	{"DeleteTheLatestClearDayImage", daemon, testDeleteTheLatestClearDayImage},
	{"AnImageDeleteCutShortIsFinished", pebbleQueueMode, testAnImageDeleteCutShortIsFinished},
}
