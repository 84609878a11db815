//! The settings every PostgreSQL manager shares, written once: the pooler
//! mode, what happens to named statements behind a pooler, and the fleet
//! budget with its fair share state.
//!
//! `PostgresManager` and the sqlx PostgreSQL manager each hold a
//! [`PgSettings`] and forward their setters to it; both check it with
//! [`PgSettings::check`] and turn the [`PgSettingsError`] into their own
//! error type. A driver crate that builds a PostgreSQL manager of its own
//! does the same.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::fleet::{FleetBudget, FleetBudgetConfigError, FleetShare, FleetShareView};
use crate::pooler::{PoolerMode, PoolerStatements};

/// The pooler and fleet budget settings of one PostgreSQL manager (and its
/// clones, which share one fair share instance).
///
/// The setters never fail, so a manager's builder chains; what cannot work
/// is kept and reported by [`check`](Self::check).
///
/// ```
/// use pool_postgres::pooler::PoolerMode;
/// use pool_postgres::settings::{PgSettings, PgSettingsError};
///
/// let mut settings = PgSettings::default();
/// settings.set_fleet_budget("shop-api", 80);
/// assert!(settings.check().is_ok());
/// settings.set_pooler_mode(PoolerMode::Transaction);
/// assert_eq!(settings.check(), Err(PgSettingsError::FleetBudgetBehindPooler));
/// ```
#[derive(Clone, Debug, Default)]
pub struct PgSettings {
    pooler_mode: PoolerMode,
    pooler_statements: PoolerStatements,
    /// Set by `set_fleet_budget`; an invalid one is kept as its error.
    fleet: Option<Result<FleetBudget, FleetBudgetConfigError>>,
    /// The fair share state of a valid budget with fair share on, shared
    /// by clones.
    share: Option<Arc<FleetShare>>,
}

impl PgSettings {
    /// Sets the pooler mode (see `PostgresManager::pooler_mode`).
    pub fn set_pooler_mode(&mut self, mode: PoolerMode) {
        self.pooler_mode = mode;
    }

    /// Sets what reaches a transaction-mode pooler of named statements (see
    /// `PostgresManager::pooler_statements`).
    pub fn set_pooler_statements(&mut self, statements: PoolerStatements) {
        self.pooler_statements = statements;
    }

    /// Sets the fleet budget `name` of `total` tickets, with fair share on
    /// at the default interval for a total of 2 or more. A share interval
    /// set before any budget stays an error.
    pub fn set_fleet_budget(&mut self, name: &str, total: u32) {
        self.fleet = match self.fleet.take() {
            Some(Err(FleetBudgetConfigError::ShareIntervalWithoutBudget)) => {
                Some(Err(FleetBudgetConfigError::ShareIntervalWithoutBudget))
            }
            _ => Some(FleetBudget::new(name, total)),
        };
        self.share_again();
    }

    /// Sets how often this instance rechecks its fair share, or turns fair
    /// share off (`None`), on the budget set before.
    pub fn set_fleet_share_interval(&mut self, interval: Option<Duration>) {
        self.fleet = Some(match self.fleet.take() {
            None => Err(FleetBudgetConfigError::ShareIntervalWithoutBudget),
            Some(budget) => budget.and_then(|budget| budget.with_share_interval(interval)),
        });
        self.share_again();
    }

    /// A new fair share instance for what the setters left: a valid budget
    /// with fair share on.
    fn share_again(&mut self) {
        self.share = self
            .fleet
            .as_ref()
            .and_then(|budget| FleetShare::new(budget.as_ref().ok()?));
    }

    /// The pooler mode in force.
    pub fn pooler_mode(&self) -> PoolerMode {
        self.pooler_mode
    }

    /// What reaches a transaction-mode pooler of named statements.
    pub fn pooler_statements(&self) -> PoolerStatements {
        self.pooler_statements
    }

    /// Whether statements reach the server unnamed, through the statement
    /// relay: unnamed statements behind a transaction-mode pooler.
    pub fn unnamed(&self) -> bool {
        self.pooler_mode == PoolerMode::Transaction
            && self.pooler_statements == PoolerStatements::Unnamed
    }

    /// The fleet budget, if one is set and valid.
    pub fn fleet_budget(&self) -> Option<&FleetBudget> {
        self.fleet.as_ref().and_then(|budget| budget.as_ref().ok())
    }

    /// The fleet budget as set: valid, invalid (its error), or none.
    pub fn fleet_setting(&self) -> Option<&Result<FleetBudget, FleetBudgetConfigError>> {
        self.fleet.as_ref()
    }

    /// The fair share state, with a valid budget and fair share on.
    pub fn share(&self) -> Option<&Arc<FleetShare>> {
        self.share.as_ref()
    }

    /// This instance's view of its fair share, as of its last recheck;
    /// `None` without a budget or with fair share off.
    pub fn fleet_share(&self) -> Option<FleetShareView> {
        self.share.as_deref().map(FleetShare::view)
    }

    /// Checks that the settings work together.
    ///
    /// # Errors
    ///
    /// In this order: [`PgSettingsError::FleetBudget`] for an invalid
    /// budget, [`PgSettingsError::FleetBudgetBehindPooler`] for a budget
    /// under [`PoolerMode::Transaction`], and
    /// [`PgSettingsError::UnnamedOutsideTransactionMode`] for
    /// [`PoolerStatements::Unnamed`] without it.
    pub fn check(&self) -> Result<(), PgSettingsError> {
        match &self.fleet {
            Some(Err(e)) => return Err(PgSettingsError::FleetBudget(e.clone())),
            Some(Ok(_)) if self.pooler_mode == PoolerMode::Transaction => {
                return Err(PgSettingsError::FleetBudgetBehindPooler)
            }
            _ => {}
        }
        if self.pooler_statements == PoolerStatements::Unnamed
            && self.pooler_mode != PoolerMode::Transaction
        {
            return Err(PgSettingsError::UnnamedOutsideTransactionMode);
        }
        Ok(())
    }
}

/// Settings of a [`PgSettings`] that cannot work together; each manager
/// turns it into its own error type.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PgSettingsError {
    /// The fleet budget itself is invalid.
    FleetBudget(FleetBudgetConfigError),
    /// A fleet budget behind a transaction-mode pooler: its tickets are
    /// advisory session locks, which would be taken on whichever server
    /// connection ran the claim and belong to no client.
    FleetBudgetBehindPooler,
    /// [`PoolerStatements::Unnamed`] without [`PoolerMode::Transaction`]:
    /// the statement relay is for transaction-mode poolers only.
    UnnamedOutsideTransactionMode,
}

impl fmt::Display for PgSettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FleetBudget(e) => fmt::Display::fmt(e, f),
            Self::FleetBudgetBehindPooler => {
                fmt::Display::fmt(&FleetBudgetConfigError::BehindTransactionPooler, f)
            }
            Self::UnnamedOutsideTransactionMode => f.write_str(
                "pooler_statements(PoolerStatements::Unnamed) needs \
                 pooler_mode(PoolerMode::Transaction): named statements are safe on a direct \
                 connection or a session-mode pooler",
            ),
        }
    }
}

impl Error for PgSettingsError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::FleetBudget(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budgeted() -> PgSettings {
        let mut settings = PgSettings::default();
        settings.set_fleet_budget("shop-api", 8);
        settings
    }

    #[test]
    fn the_defaults_are_a_direct_connection_without_a_budget() {
        let settings = PgSettings::default();
        assert_eq!(settings.check(), Ok(()));
        assert!(!settings.unnamed());
        assert!(settings.fleet_setting().is_none() && settings.share().is_none());
    }

    #[test]
    fn an_invalid_budget_is_reported_before_any_other_clash() {
        let mut settings = PgSettings::default();
        settings.set_fleet_budget("", 8);
        settings.set_pooler_mode(PoolerMode::Transaction);
        assert_eq!(
            settings.check(),
            Err(PgSettingsError::FleetBudget(
                FleetBudgetConfigError::EmptyName
            ))
        );
        assert!(settings.fleet_budget().is_none() && settings.share().is_none());
    }

    #[test]
    fn a_budget_behind_a_transaction_pooler_is_refused_either_way_round() {
        let mut first = budgeted();
        first.set_pooler_mode(PoolerMode::Transaction);
        let mut second = PgSettings::default();
        second.set_pooler_mode(PoolerMode::Transaction);
        second.set_fleet_budget("shop-api", 8);
        for settings in [first, second] {
            assert_eq!(
                settings.check(),
                Err(PgSettingsError::FleetBudgetBehindPooler)
            );
        }
    }

    #[test]
    fn unnamed_statements_need_transaction_mode() {
        let mut settings = PgSettings::default();
        settings.set_pooler_statements(PoolerStatements::Unnamed);
        assert_eq!(
            settings.check(),
            Err(PgSettingsError::UnnamedOutsideTransactionMode)
        );
        assert!(!settings.unnamed());
        settings.set_pooler_mode(PoolerMode::Transaction);
        assert_eq!(settings.check(), Ok(()));
        assert!(settings.unnamed());
        settings.set_pooler_mode(PoolerMode::Session);
        assert!(!settings.unnamed());
    }

    #[test]
    fn a_share_interval_before_any_budget_stays_an_error() {
        // Turning fair share off (`None`) before any budget is the same
        // mistake as setting an interval: there is nothing to apply it to.
        for interval in [Some(Duration::from_millis(500)), None] {
            let mut settings = PgSettings::default();
            settings.set_fleet_share_interval(interval);
            assert_eq!(
                settings.check(),
                Err(PgSettingsError::FleetBudget(
                    FleetBudgetConfigError::ShareIntervalWithoutBudget
                ))
            );
            settings.set_fleet_budget("shop-api", 8);
            assert_eq!(
                settings.check(),
                Err(PgSettingsError::FleetBudget(
                    FleetBudgetConfigError::ShareIntervalWithoutBudget
                ))
            );
            assert!(settings.share().is_none());
        }
    }

    #[test]
    fn the_interval_applies_to_the_budget_set_before_and_keeps_its_error() {
        let mut late = budgeted();
        late.set_fleet_share_interval(Some(Duration::from_millis(5)));
        assert_eq!(
            late.fleet_budget().map(FleetBudget::share_interval),
            Some(Some(Duration::from_millis(5)))
        );
        let mut invalid = PgSettings::default();
        invalid.set_fleet_budget("", 3);
        invalid.set_fleet_share_interval(None);
        assert_eq!(
            invalid.check(),
            Err(PgSettingsError::FleetBudget(
                FleetBudgetConfigError::EmptyName
            ))
        );
        let mut zero = PgSettings::default();
        zero.set_fleet_budget("shop-api", 0);
        assert!(zero.share().is_none() && zero.fleet_budget().is_none());
        assert_eq!(
            zero.check(),
            Err(PgSettingsError::FleetBudget(
                FleetBudgetConfigError::ZeroTotal
            ))
        );
    }

    #[test]
    fn fair_share_follows_the_last_setter_and_clones_share_one_instance() {
        let mut settings = budgeted();
        let share = Arc::clone(settings.share().expect("fair share is on by default"));
        let clone = settings.clone();
        assert!(Arc::ptr_eq(
            &share,
            clone.share().expect("the clone's share")
        ));
        assert!(settings.fleet_share().is_some());

        settings.set_fleet_share_interval(None);
        assert!(settings.share().is_none() && settings.fleet_share().is_none());
        assert_eq!(settings.check(), Ok(()));

        settings.set_fleet_share_interval(Some(Duration::from_millis(500)));
        let again = settings.share().expect("fair share on again");
        assert!(!Arc::ptr_eq(&share, again), "a new setting, a new instance");

        settings.set_fleet_share_interval(Some(Duration::ZERO));
        assert_eq!(
            settings.check(),
            Err(PgSettingsError::FleetBudget(
                FleetBudgetConfigError::ZeroShareInterval
            ))
        );
        assert!(settings.share().is_none());
    }

    #[test]
    fn each_clash_names_both_settings() {
        assert!(PgSettingsError::FleetBudgetBehindPooler
            .to_string()
            .contains("PoolerMode::Transaction"));
        let unnamed = PgSettingsError::UnnamedOutsideTransactionMode.to_string();
        assert!(unnamed.contains("PoolerStatements::Unnamed") && unnamed.contains("Transaction"));
    }
}
