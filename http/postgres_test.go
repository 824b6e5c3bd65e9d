package http_test

import "testing"

// TestPostgresSuite reruns the end-to-end tests against PostgreSQL, each in
// a schema of its own (skipped unless VDIBROKER_TEST_POSTGRES_DSN is set).
func TestPostgresSuite(t *testing.T) {
	dsn := postgresDSN(t)
	suitePostgres = dsn
	defer func() { suitePostgres = "" }()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"PutHostPoolDefaults_SPEC2", TestPutHostPoolDefaults_SPEC2},
		{"GatewayTokenIsOneGateway_RGW4", TestGatewayTokenIsOneGateway_RGW4},
		{"GatewayTokenMovesOnlyItsTunnels_RGW4", TestGatewayTokenMovesOnlyItsTunnels_RGW4},
		{"Audit_PrincipalInAnyCase_RE5", TestAudit_PrincipalInAnyCase_RE5},
		{"HostPoolValidation_RP4", TestHostPoolValidation_RP4},
		{"BadBodies_SPEC9", TestBadBodies_SPEC9},
		{"PatchHostPool_RP1_RP3", TestPatchHostPool_RP1_RP3},
		{"PersistentChangeWarnsOfSharedHosts_RP1", TestPersistentChangeWarnsOfSharedHosts_RP1},
		{"DeleteHostPool_SPEC9", TestDeleteHostPool_SPEC9},
		{"DeletePoolWithRunningHost_SPEC9", TestDeletePoolWithRunningHost_SPEC9},
		{"Connect_RC1_ReconnectToDrainedHostOverLimit", TestConnect_RC1_ReconnectToDrainedHostOverLimit},
		{"Connect_RC1_UnavailableHostEndsOldSession", TestConnect_RC1_UnavailableHostEndsOldSession},
		{"Connect_RC1_ReplicaReconnectAtLimit", TestConnect_RC1_ReplicaReconnectAtLimit},
		{"Connect_RC2_DrainedHostsSkipped", TestConnect_RC2_DrainedHostsSkipped},
		{"Connect_RC3_UnavailableHostsSkipped", TestConnect_RC3_UnavailableHostsSkipped},
		{"Connect_RP2_LoweringLimitEndsNothing", TestConnect_RP2_LoweringLimitEndsNothing},
		{"Connect_RC5_NoCapacityMessages", TestConnect_RC5_NoCapacityMessages},
		{"Connect_RC8_DryRun_RC7_Record", TestConnect_RC8_DryRun_RC7_Record},
		{"DryRunWritesNothing_RC8", TestDryRunWritesNothing_RC8},
		{"RoundRobinCursorShared_RLI4", TestRoundRobinCursorShared_RLI4},
		{"StaleMetricsCompensationSurvivesHeartbeats_RLI6", TestStaleMetricsCompensationSurvivesHeartbeats_RLI6},
		{"Connect_RDPFile", TestConnect_RDPFile},
		{"Connect_RC6_IdempotencyKey", TestConnect_RC6_IdempotencyKey},
		{"Connect_RPE_Personal", TestConnect_RPE_Personal},
		{"StartVMOnConnectUnknownHosts_RA4", TestStartVMOnConnectUnknownHosts_RA4},
		{"StartVMOnConnectSilentRunningHosts_RA4", TestStartVMOnConnectSilentRunningHosts_RA4},
		{"AdminRestartsTimedOutStart_RA4", TestAdminRestartsTimedOutStart_RA4},
		{"NoRestartOfHostShuttingDown_RA4", TestNoRestartOfHostShuttingDown_RA4},
		{"StopThenStartOfHostShuttingDown_RA4", TestStopThenStartOfHostShuttingDown_RA4},
		{"StartVMOnConnectPassesOverHostShuttingDown_RA4", TestStartVMOnConnectPassesOverHostShuttingDown_RA4},
		{"StartVMOnConnectPersonalDesktopShuttingDown_RA4", TestStartVMOnConnectPersonalDesktopShuttingDown_RA4},
		{"StartVMOnConnectPersonalAnswers_RA4", TestStartVMOnConnectPersonalAnswers_RA4},
		{"ConnectNamedSession_RC1_RPE3", TestConnectNamedSession_RC1_RPE3},
		{"Connect_Validation", TestConnect_Validation},
		{"HeartbeatReconciliation_RS2", TestHeartbeatReconciliation_RS2},
		{"SessionCommands_RS4", TestSessionCommands_RS4},
		{"CommandWarnings_RS4", TestCommandWarnings_RS4},
		{"HostMessage_RS4", TestHostMessage_RS4},
		{"PendingTimeout_RS3", TestPendingTimeout_RS3},
		{"DisconnectedTimeout_RS5", TestDisconnectedTimeout_RS5},
		{"RegisterAndCredentials_RSEC", TestRegisterAndCredentials_RSEC},
		{"SessionHostAPI_SPEC9", TestSessionHostAPI_SPEC9},
		{"AuthRoles_RSEC", TestAuthRoles_RSEC},
		{"Tokens_RSEC", TestTokens_RSEC},
		{"Paging_SPEC9", TestPaging_SPEC9},
		{"UserPrefixSearch_SPEC9", TestUserPrefixSearch_SPEC9},
		{"StoredIDsOneShape", TestStoredIDsOneShape},
		{"ConcurrentConnects_RC4_RC6", TestConcurrentConnects_RC4_RC6_SQLite},
		{"HostStatusAndLoadIndex_RH1_RIDX", TestHostStatusAndLoadIndex_RH1_RIDX},
		{"MaintenanceLoop_RS3", TestMaintenanceLoop_RS3},
		{"AuthMatrix_Scopes", TestAuthMatrix_Scopes},
		{"ScopedToken_RSEC", TestScopedToken_RSEC},
		{"Audit_EveryAction", TestAudit_EveryAction},
		{"Audit_Refusals", TestAudit_Refusals},
		{"Audit_NewestFirst", TestAudit_NewestFirst},
		{"AuditActionNotARouteOfTheAPI_RSEC", TestAuditActionNotARouteOfTheAPI_RSEC},
		{"AuditActionOfRouteNeverAudited_RSEC", TestAuditActionOfRouteNeverAudited_RSEC},
		{"AuditActionOfAnAuditedRoutesPattern_RSEC", TestAuditActionOfAnAuditedRoutesPattern_RSEC},
		{"AuditActionOfAnEarlierReleaseNarrowed_RSEC", TestAuditActionOfAnEarlierReleaseNarrowed_RSEC},
		{"OIDCBearer", TestOIDCBearer},
		{"ScalingPlanAPI", TestScalingPlanAPI},
		{"ScalingPlanBadInput_RSP1", TestScalingPlanBadInput_RSP1},
		{"ScalingPlanAttackers_RSP5", TestScalingPlanAttackers_RSP5},
		{"ScalingPlanAudit", TestScalingPlanAudit},
		{"DeletePoolLeavesPlanAPI_RSP4", TestDeletePoolLeavesPlanAPI_RSP4},
		{"ScalingPlanReplicasRace_RSP4", TestScalingPlanReplicasRace_RSP4},
		// Entitlements (entitlements_test.go).
		{"ApplicationGroupAPI_RE1", TestApplicationGroupAPI_RE1},
		{"EntitlementEnforced_RE3", TestEntitlementEnforced_RE3},
		{"CaseInsensitiveUsers_RE5", TestCaseInsensitiveUsers_RE5},
		{"RemoteAppConnect_RE7_RE8", TestRemoteAppConnect_RE7_RE8},
		{"UserEntitlements_RE10", TestUserEntitlements_RE10},
		{"EntitlementRoutes_Matrix", TestEntitlementRoutes_Matrix},
		{"PersonalRules_RPE", TestPersonalRules_RPE},
		// Hosts that cannot run RemoteApps (remoteapps_test.go).
		{"ApplicationPlacedWhereItRuns_RE12", TestApplicationPlacedWhereItRuns_RE12},
		{"HostSaysOnlyForItself_RE12", TestHostSaysOnlyForItself_RE12},
		{"RemoteAppsWarning_RE12", TestRemoteAppsWarning_RE12},
		{"FeedSaysRemoteAppUnsupported_RE12_RU5", TestFeedSaysRemoteAppUnsupported_RE12_RU5},
		{"Feed_RU5", TestFeed_RU5},
		// If-Match and If-None-Match (ifmatch_test.go).
		{"IfMatch_RE13", TestIfMatch_RE13},
		{"IfMatchOutOfScope_RE13", TestIfMatchOutOfScope_RE13},
		{"IfMatchPatchDelete_RE13", TestIfMatchPatchDelete_RE13},
		{"GroupETagCoversApps_RE13", TestGroupETagCoversApps_RE13},
		// An end user's write budget (userbudget_test.go), and a logoff
		// asked again audited per asker (agent_test.go).
		{"UserWriteBudget_RSEC", TestUserWriteBudget_RSEC},
		{"UserWriteBudget_EveryUserWrite", TestUserWriteBudget_EveryUserWrite},
		{"UserWriteBuckets_Bounded", TestUserWriteBuckets_Bounded},
		{"RepeatedCommandQueuedOnce", TestRepeatedCommandQueuedOnce},
		// Host names unique ignoring case (hostname_test.go).
		{"RegisterSameNameIgnoringCase_RSEC", TestRegisterSameNameIgnoringCase_RSEC},
		{"RegisterSameNameAtOnce_RD3", TestRegisterSameNameAtOnce_RD3},
		{"RegistrationTokenForTwinName_RSEC", TestRegistrationTokenForTwinName_RSEC},
		// What one host's credential or a registration token can do
		// (hostcred_test.go).
		{"OutageStateGoesWithItsHost_RSEC", TestOutageStateGoesWithItsHost_RSEC},
		{"OutageStateGoesWithItsNameOnEveryReplica_RSEC", TestOutageStateGoesWithItsNameOnEveryReplica_RSEC},
		{"GoneHostsReportGoesOnEveryReplica_RSEC", TestGoneHostsReportGoesOnEveryReplica_RSEC},
		{"RegistrationTokenReach_RSEC", TestRegistrationTokenReach_RSEC},
		{"HostCredentialReach_RSEC", TestHostCredentialReach_RSEC},
		{"ReKeyBound_RSEC", TestReKeyBound_RSEC},
		{"NewHostsPerTokenBound_RSEC", TestNewHostsPerTokenBound_RSEC},
		{"NewHostsPerTokenConcurrent_RSEC", TestNewHostsPerTokenConcurrent_RSEC},
		{"NewHostsSpentRefusedBeforeWrite_RSEC", TestNewHostsSpentRefusedBeforeWrite_RSEC},
	} {
		t.Run(tc.name, tc.fn)
	}
}
