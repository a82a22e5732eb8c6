// The R4 resource types of github.com/samply/golang-fhir-models/fhir-models
// v0.3.2, one entry per UnmarshalX function the library exports (found with
// grep '^func Unmarshal' in its fhir directory). TestR4TableMatchesLibrary
// checks the table against the library's source, so a new library version
// with other types fails the test until the table follows.

package fhir

import (
	"sort"

	models "github.com/samply/golang-fhir-models/fhir-models/fhir"
)

// r4Unmarshal maps every concrete R4 resource type to a function that decodes
// a line into the library's struct of that type. The abstract Resource and
// DomainResource are left out: no resource has them as its resourceType.
var r4Unmarshal = map[string]func([]byte) error{
	"Account":                           func(b []byte) error { _, err := models.UnmarshalAccount(b); return err },
	"ActivityDefinition":                func(b []byte) error { _, err := models.UnmarshalActivityDefinition(b); return err },
	"AdverseEvent":                      func(b []byte) error { _, err := models.UnmarshalAdverseEvent(b); return err },
	"AllergyIntolerance":                func(b []byte) error { _, err := models.UnmarshalAllergyIntolerance(b); return err },
	"Appointment":                       func(b []byte) error { _, err := models.UnmarshalAppointment(b); return err },
	"AppointmentResponse":               func(b []byte) error { _, err := models.UnmarshalAppointmentResponse(b); return err },
	"AuditEvent":                        func(b []byte) error { _, err := models.UnmarshalAuditEvent(b); return err },
	"Basic":                             func(b []byte) error { _, err := models.UnmarshalBasic(b); return err },
	"Binary":                            func(b []byte) error { _, err := models.UnmarshalBinary(b); return err },
	"BiologicallyDerivedProduct":        func(b []byte) error { _, err := models.UnmarshalBiologicallyDerivedProduct(b); return err },
	"BodyStructure":                     func(b []byte) error { _, err := models.UnmarshalBodyStructure(b); return err },
	"Bundle":                            func(b []byte) error { _, err := models.UnmarshalBundle(b); return err },
	"CapabilityStatement":               func(b []byte) error { _, err := models.UnmarshalCapabilityStatement(b); return err },
	"CarePlan":                          func(b []byte) error { _, err := models.UnmarshalCarePlan(b); return err },
	"CareTeam":                          func(b []byte) error { _, err := models.UnmarshalCareTeam(b); return err },
	"CatalogEntry":                      func(b []byte) error { _, err := models.UnmarshalCatalogEntry(b); return err },
	"ChargeItem":                        func(b []byte) error { _, err := models.UnmarshalChargeItem(b); return err },
	"ChargeItemDefinition":              func(b []byte) error { _, err := models.UnmarshalChargeItemDefinition(b); return err },
	"Claim":                             func(b []byte) error { _, err := models.UnmarshalClaim(b); return err },
	"ClaimResponse":                     func(b []byte) error { _, err := models.UnmarshalClaimResponse(b); return err },
	"ClinicalImpression":                func(b []byte) error { _, err := models.UnmarshalClinicalImpression(b); return err },
	"CodeSystem":                        func(b []byte) error { _, err := models.UnmarshalCodeSystem(b); return err },
	"Communication":                     func(b []byte) error { _, err := models.UnmarshalCommunication(b); return err },
	"CommunicationRequest":              func(b []byte) error { _, err := models.UnmarshalCommunicationRequest(b); return err },
	"CompartmentDefinition":             func(b []byte) error { _, err := models.UnmarshalCompartmentDefinition(b); return err },
	"Composition":                       func(b []byte) error { _, err := models.UnmarshalComposition(b); return err },
	"ConceptMap":                        func(b []byte) error { _, err := models.UnmarshalConceptMap(b); return err },
	"Condition":                         func(b []byte) error { _, err := models.UnmarshalCondition(b); return err },
	"Consent":                           func(b []byte) error { _, err := models.UnmarshalConsent(b); return err },
	"Contract":                          func(b []byte) error { _, err := models.UnmarshalContract(b); return err },
	"Coverage":                          func(b []byte) error { _, err := models.UnmarshalCoverage(b); return err },
	"CoverageEligibilityRequest":        func(b []byte) error { _, err := models.UnmarshalCoverageEligibilityRequest(b); return err },
	"CoverageEligibilityResponse":       func(b []byte) error { _, err := models.UnmarshalCoverageEligibilityResponse(b); return err },
	"DetectedIssue":                     func(b []byte) error { _, err := models.UnmarshalDetectedIssue(b); return err },
	"Device":                            func(b []byte) error { _, err := models.UnmarshalDevice(b); return err },
	"DeviceDefinition":                  func(b []byte) error { _, err := models.UnmarshalDeviceDefinition(b); return err },
	"DeviceMetric":                      func(b []byte) error { _, err := models.UnmarshalDeviceMetric(b); return err },
	"DeviceRequest":                     func(b []byte) error { _, err := models.UnmarshalDeviceRequest(b); return err },
	"DeviceUseStatement":                func(b []byte) error { _, err := models.UnmarshalDeviceUseStatement(b); return err },
	"DiagnosticReport":                  func(b []byte) error { _, err := models.UnmarshalDiagnosticReport(b); return err },
	"DocumentManifest":                  func(b []byte) error { _, err := models.UnmarshalDocumentManifest(b); return err },
	"DocumentReference":                 func(b []byte) error { _, err := models.UnmarshalDocumentReference(b); return err },
	"EffectEvidenceSynthesis":           func(b []byte) error { _, err := models.UnmarshalEffectEvidenceSynthesis(b); return err },
	"Encounter":                         func(b []byte) error { _, err := models.UnmarshalEncounter(b); return err },
	"Endpoint":                          func(b []byte) error { _, err := models.UnmarshalEndpoint(b); return err },
	"EnrollmentRequest":                 func(b []byte) error { _, err := models.UnmarshalEnrollmentRequest(b); return err },
	"EnrollmentResponse":                func(b []byte) error { _, err := models.UnmarshalEnrollmentResponse(b); return err },
	"EpisodeOfCare":                     func(b []byte) error { _, err := models.UnmarshalEpisodeOfCare(b); return err },
	"EventDefinition":                   func(b []byte) error { _, err := models.UnmarshalEventDefinition(b); return err },
	"Evidence":                          func(b []byte) error { _, err := models.UnmarshalEvidence(b); return err },
	"EvidenceVariable":                  func(b []byte) error { _, err := models.UnmarshalEvidenceVariable(b); return err },
	"ExampleScenario":                   func(b []byte) error { _, err := models.UnmarshalExampleScenario(b); return err },
	"ExplanationOfBenefit":              func(b []byte) error { _, err := models.UnmarshalExplanationOfBenefit(b); return err },
	"FamilyMemberHistory":               func(b []byte) error { _, err := models.UnmarshalFamilyMemberHistory(b); return err },
	"Flag":                              func(b []byte) error { _, err := models.UnmarshalFlag(b); return err },
	"Goal":                              func(b []byte) error { _, err := models.UnmarshalGoal(b); return err },
	"GraphDefinition":                   func(b []byte) error { _, err := models.UnmarshalGraphDefinition(b); return err },
	"Group":                             func(b []byte) error { _, err := models.UnmarshalGroup(b); return err },
	"GuidanceResponse":                  func(b []byte) error { _, err := models.UnmarshalGuidanceResponse(b); return err },
	"HealthcareService":                 func(b []byte) error { _, err := models.UnmarshalHealthcareService(b); return err },
	"ImagingStudy":                      func(b []byte) error { _, err := models.UnmarshalImagingStudy(b); return err },
	"Immunization":                      func(b []byte) error { _, err := models.UnmarshalImmunization(b); return err },
	"ImmunizationEvaluation":            func(b []byte) error { _, err := models.UnmarshalImmunizationEvaluation(b); return err },
	"ImmunizationRecommendation":        func(b []byte) error { _, err := models.UnmarshalImmunizationRecommendation(b); return err },
	"ImplementationGuide":               func(b []byte) error { _, err := models.UnmarshalImplementationGuide(b); return err },
	"InsurancePlan":                     func(b []byte) error { _, err := models.UnmarshalInsurancePlan(b); return err },
	"Invoice":                           func(b []byte) error { _, err := models.UnmarshalInvoice(b); return err },
	"Library":                           func(b []byte) error { _, err := models.UnmarshalLibrary(b); return err },
	"Linkage":                           func(b []byte) error { _, err := models.UnmarshalLinkage(b); return err },
	"List":                              func(b []byte) error { _, err := models.UnmarshalList(b); return err },
	"Location":                          func(b []byte) error { _, err := models.UnmarshalLocation(b); return err },
	"Measure":                           func(b []byte) error { _, err := models.UnmarshalMeasure(b); return err },
	"MeasureReport":                     func(b []byte) error { _, err := models.UnmarshalMeasureReport(b); return err },
	"Media":                             func(b []byte) error { _, err := models.UnmarshalMedia(b); return err },
	"Medication":                        func(b []byte) error { _, err := models.UnmarshalMedication(b); return err },
	"MedicationAdministration":          func(b []byte) error { _, err := models.UnmarshalMedicationAdministration(b); return err },
	"MedicationDispense":                func(b []byte) error { _, err := models.UnmarshalMedicationDispense(b); return err },
	"MedicationKnowledge":               func(b []byte) error { _, err := models.UnmarshalMedicationKnowledge(b); return err },
	"MedicationRequest":                 func(b []byte) error { _, err := models.UnmarshalMedicationRequest(b); return err },
	"MedicationStatement":               func(b []byte) error { _, err := models.UnmarshalMedicationStatement(b); return err },
	"MedicinalProduct":                  func(b []byte) error { _, err := models.UnmarshalMedicinalProduct(b); return err },
	"MedicinalProductAuthorization":     func(b []byte) error { _, err := models.UnmarshalMedicinalProductAuthorization(b); return err },
	"MedicinalProductContraindication":  func(b []byte) error { _, err := models.UnmarshalMedicinalProductContraindication(b); return err },
	"MedicinalProductIndication":        func(b []byte) error { _, err := models.UnmarshalMedicinalProductIndication(b); return err },
	"MedicinalProductIngredient":        func(b []byte) error { _, err := models.UnmarshalMedicinalProductIngredient(b); return err },
	"MedicinalProductInteraction":       func(b []byte) error { _, err := models.UnmarshalMedicinalProductInteraction(b); return err },
	"MedicinalProductManufactured":      func(b []byte) error { _, err := models.UnmarshalMedicinalProductManufactured(b); return err },
	"MedicinalProductPackaged":          func(b []byte) error { _, err := models.UnmarshalMedicinalProductPackaged(b); return err },
	"MedicinalProductPharmaceutical":    func(b []byte) error { _, err := models.UnmarshalMedicinalProductPharmaceutical(b); return err },
	"MedicinalProductUndesirableEffect": func(b []byte) error { _, err := models.UnmarshalMedicinalProductUndesirableEffect(b); return err },
	"MessageDefinition":                 func(b []byte) error { _, err := models.UnmarshalMessageDefinition(b); return err },
	"MessageHeader":                     func(b []byte) error { _, err := models.UnmarshalMessageHeader(b); return err },
	"MolecularSequence":                 func(b []byte) error { _, err := models.UnmarshalMolecularSequence(b); return err },
	"NamingSystem":                      func(b []byte) error { _, err := models.UnmarshalNamingSystem(b); return err },
	"NutritionOrder":                    func(b []byte) error { _, err := models.UnmarshalNutritionOrder(b); return err },
	"Observation":                       func(b []byte) error { _, err := models.UnmarshalObservation(b); return err },
	"ObservationDefinition":             func(b []byte) error { _, err := models.UnmarshalObservationDefinition(b); return err },
	"OperationDefinition":               func(b []byte) error { _, err := models.UnmarshalOperationDefinition(b); return err },
	"OperationOutcome":                  func(b []byte) error { _, err := models.UnmarshalOperationOutcome(b); return err },
	"Organization":                      func(b []byte) error { _, err := models.UnmarshalOrganization(b); return err },
	"OrganizationAffiliation":           func(b []byte) error { _, err := models.UnmarshalOrganizationAffiliation(b); return err },
	"Parameters":                        func(b []byte) error { _, err := models.UnmarshalParameters(b); return err },
	"Patient":                           func(b []byte) error { _, err := models.UnmarshalPatient(b); return err },
	"PaymentNotice":                     func(b []byte) error { _, err := models.UnmarshalPaymentNotice(b); return err },
	"PaymentReconciliation":             func(b []byte) error { _, err := models.UnmarshalPaymentReconciliation(b); return err },
	"Person":                            func(b []byte) error { _, err := models.UnmarshalPerson(b); return err },
	"PlanDefinition":                    func(b []byte) error { _, err := models.UnmarshalPlanDefinition(b); return err },
	"Practitioner":                      func(b []byte) error { _, err := models.UnmarshalPractitioner(b); return err },
	"PractitionerRole":                  func(b []byte) error { _, err := models.UnmarshalPractitionerRole(b); return err },
	"Procedure":                         func(b []byte) error { _, err := models.UnmarshalProcedure(b); return err },
	"Provenance":                        func(b []byte) error { _, err := models.UnmarshalProvenance(b); return err },
	"Questionnaire":                     func(b []byte) error { _, err := models.UnmarshalQuestionnaire(b); return err },
	"QuestionnaireResponse":             func(b []byte) error { _, err := models.UnmarshalQuestionnaireResponse(b); return err },
	"RelatedPerson":                     func(b []byte) error { _, err := models.UnmarshalRelatedPerson(b); return err },
	"RequestGroup":                      func(b []byte) error { _, err := models.UnmarshalRequestGroup(b); return err },
	"ResearchDefinition":                func(b []byte) error { _, err := models.UnmarshalResearchDefinition(b); return err },
	"ResearchElementDefinition":         func(b []byte) error { _, err := models.UnmarshalResearchElementDefinition(b); return err },
	"ResearchStudy":                     func(b []byte) error { _, err := models.UnmarshalResearchStudy(b); return err },
	"ResearchSubject":                   func(b []byte) error { _, err := models.UnmarshalResearchSubject(b); return err },
	"RiskAssessment":                    func(b []byte) error { _, err := models.UnmarshalRiskAssessment(b); return err },
	"RiskEvidenceSynthesis":             func(b []byte) error { _, err := models.UnmarshalRiskEvidenceSynthesis(b); return err },
	"Schedule":                          func(b []byte) error { _, err := models.UnmarshalSchedule(b); return err },
	"SearchParameter":                   func(b []byte) error { _, err := models.UnmarshalSearchParameter(b); return err },
	"ServiceRequest":                    func(b []byte) error { _, err := models.UnmarshalServiceRequest(b); return err },
	"Slot":                              func(b []byte) error { _, err := models.UnmarshalSlot(b); return err },
	"Specimen":                          func(b []byte) error { _, err := models.UnmarshalSpecimen(b); return err },
	"SpecimenDefinition":                func(b []byte) error { _, err := models.UnmarshalSpecimenDefinition(b); return err },
	"StructureDefinition":               func(b []byte) error { _, err := models.UnmarshalStructureDefinition(b); return err },
	"StructureMap":                      func(b []byte) error { _, err := models.UnmarshalStructureMap(b); return err },
	"Subscription":                      func(b []byte) error { _, err := models.UnmarshalSubscription(b); return err },
	"Substance":                         func(b []byte) error { _, err := models.UnmarshalSubstance(b); return err },
	"SubstanceNucleicAcid":              func(b []byte) error { _, err := models.UnmarshalSubstanceNucleicAcid(b); return err },
	"SubstancePolymer":                  func(b []byte) error { _, err := models.UnmarshalSubstancePolymer(b); return err },
	"SubstanceProtein":                  func(b []byte) error { _, err := models.UnmarshalSubstanceProtein(b); return err },
	"SubstanceReferenceInformation":     func(b []byte) error { _, err := models.UnmarshalSubstanceReferenceInformation(b); return err },
	"SubstanceSourceMaterial":           func(b []byte) error { _, err := models.UnmarshalSubstanceSourceMaterial(b); return err },
	"SubstanceSpecification":            func(b []byte) error { _, err := models.UnmarshalSubstanceSpecification(b); return err },
	"SupplyDelivery":                    func(b []byte) error { _, err := models.UnmarshalSupplyDelivery(b); return err },
	"SupplyRequest":                     func(b []byte) error { _, err := models.UnmarshalSupplyRequest(b); return err },
	"Task":                              func(b []byte) error { _, err := models.UnmarshalTask(b); return err },
	"TerminologyCapabilities":           func(b []byte) error { _, err := models.UnmarshalTerminologyCapabilities(b); return err },
	"TestReport":                        func(b []byte) error { _, err := models.UnmarshalTestReport(b); return err },
	"TestScript":                        func(b []byte) error { _, err := models.UnmarshalTestScript(b); return err },
	"ValueSet":                          func(b []byte) error { _, err := models.UnmarshalValueSet(b); return err },
	"VerificationResult":                func(b []byte) error { _, err := models.UnmarshalVerificationResult(b); return err },
	"VisionPrescription":                func(b []byte) error { _, err := models.UnmarshalVisionPrescription(b); return err },
}

// R4Unmarshaler returns the function that decodes a line into the
// library's struct of resourceType (its error: the line is not a
// structurally valid resource of that type), and false for a name that is
// not a concrete R4 resource type. The HealthLake emulator validates what
// it is sent with them.
func R4Unmarshaler(resourceType string) (func([]byte) error, bool) {
	f, ok := r4Unmarshal[resourceType]
	return f, ok
}

// R4Types returns every concrete R4 resource type, sorted.
func R4Types() []string {
	out := make([]string, 0, len(r4Unmarshal))
	for t := range r4Unmarshal {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
