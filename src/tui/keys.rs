//! The key bindings: a key becomes an [`Action`] (or nothing); reading the
//! app only, never changing it. Plain characters are text, so commands use
//! Ctrl or F keys; `q` and `?` act as commands only while the input is empty.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::app::{Action, App};

/// The action of `key` in the app's current state.
pub fn key_action(key: &KeyEvent, app: &App) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    if ctrl && matches!(key.code, KeyCode::Char('c')) {
        return Some(Action::Quit);
    }
    if app.show_help() {
        // Any key closes the help.
        return Some(Action::CloseHelp);
    }
    if app.profile().is_some() && key.code == KeyCode::Esc {
        return Some(Action::CloseProfile);
    }
    if app.layers().is_some() && key.code == KeyCode::Esc {
        return Some(Action::CloseLayers);
    }
    if let Some(list) = app.models() {
        // The list takes the keys while it is shown; none while a switch is under way (Ctrl-C still quits).
        if list.switching.is_some() {
            return None;
        }
        return match key.code {
            KeyCode::Up => Some(Action::MoveModel(-1)),
            KeyCode::Down => Some(Action::MoveModel(1)),
            KeyCode::PageUp => Some(Action::MoveModel(-10)),
            KeyCode::PageDown => Some(Action::MoveModel(10)),
            KeyCode::Enter => Some(Action::ChooseModel),
            KeyCode::Esc | KeyCode::F(8) => Some(Action::CloseModels),
            _ => None,
        };
    }
    let empty = app.input().is_empty();
    Some(match key.code {
        KeyCode::Char('u') if ctrl => Action::Clear,
        KeyCode::Char('s') if ctrl => Action::ToggleSerial,
        KeyCode::Char('r') if ctrl => Action::ToggleRepeat,
        KeyCode::Char('a') if ctrl => Action::Home,
        KeyCode::Char('e') if ctrl => Action::End,
        KeyCode::F(1) => Action::ToggleHelp,
        KeyCode::F(2) => Action::ToggleSerial,
        KeyCode::F(3) => Action::ToggleRepeat,
        KeyCode::F(4) => Action::ToggleProfile,
        KeyCode::F(5) => Action::NextVariant,
        KeyCode::F(6) => Action::ToggleLayers,
        KeyCode::F(7) => Action::TogglePromptFormat,
        KeyCode::F(8) => Action::ToggleModels,
        KeyCode::Esc => Action::Quit,
        KeyCode::Char('q') if empty && !ctrl && !alt => Action::Quit,
        KeyCode::Char('?') if empty && !ctrl && !alt => Action::ToggleHelp,
        KeyCode::Char(c) if !ctrl && !alt => Action::Insert(c),
        KeyCode::Enter => Action::RunNow,
        KeyCode::Backspace => Action::Backspace,
        KeyCode::Delete => Action::Delete,
        KeyCode::Left => Action::Left,
        KeyCode::Right => Action::Right,
        KeyCode::Home => Action::Home,
        KeyCode::End => Action::End,
        _ => return None,
    })
}

/// Ctrl-Z: in raw mode the terminal sends it as a key instead of stopping the
/// job; the event loop suspends the explorer (not an app action).
pub fn is_suspend_key(key: &KeyEvent) -> bool {
    key.kind != KeyEventKind::Release && key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('z')
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::app::AppConfig;

    /// An embedding app with one column and no tokenizer: keys only.
    fn test_app() -> App {
        let config = AppConfig {
            kinds: vec![crate::backend::named("xnnpack")],
            threads: 1,
            model: "m".into(),
            task: crate::task::Task::FeatureExtraction,
            corpus: vec![],
            variants: vec![],
        };
        App::new(config, Box::new(|t: &str| anyhow::bail!("no tokenizer for {t}")), Instant::now())
    }

    #[test]
    fn keys_map_to_actions_and_letters_are_text() {
        let mut app = test_app();
        let key = |code, modifiers| KeyEvent::new(code, modifiers);
        let none = KeyModifiers::NONE;
        let ctrl = KeyModifiers::CONTROL;
        assert_eq!(key_action(&key(KeyCode::Char('q'), none), &app), Some(Action::Quit));
        assert_eq!(key_action(&key(KeyCode::Char('?'), none), &app), Some(Action::ToggleHelp));
        app.apply(Action::Insert('a'));
        assert_eq!(key_action(&key(KeyCode::Char('q'), none), &app), Some(Action::Insert('q')), "q is text once there is text");
        assert_eq!(key_action(&key(KeyCode::Char('?'), none), &app), Some(Action::Insert('?')));
        assert_eq!(key_action(&key(KeyCode::Esc, none), &app), Some(Action::Quit));
        assert_eq!(key_action(&key(KeyCode::Char('c'), ctrl), &app), Some(Action::Quit));
        assert_eq!(key_action(&key(KeyCode::Char('s'), ctrl), &app), Some(Action::ToggleSerial));
        assert_eq!(key_action(&key(KeyCode::F(3), none), &app), Some(Action::ToggleRepeat));
        assert_eq!(key_action(&key(KeyCode::Char('u'), ctrl), &app), Some(Action::Clear));
        assert_eq!(key_action(&key(KeyCode::Enter, none), &app), Some(Action::RunNow));
        assert_eq!(key_action(&key(KeyCode::F(4), none), &app), Some(Action::ToggleProfile));
        app.apply(Action::ToggleProfile);
        assert_eq!(key_action(&key(KeyCode::Esc, none), &app), Some(Action::CloseProfile), "Esc closes the profile first");
        assert_eq!(key_action(&key(KeyCode::F(4), none), &app), Some(Action::ToggleProfile));
        assert_eq!(key_action(&key(KeyCode::Char('x'), none), &app), Some(Action::Insert('x')), "typing goes on under the profile");
        app.apply(Action::CloseProfile);
        app.apply(Action::ToggleHelp);
        assert_eq!(key_action(&key(KeyCode::Esc, none), &app), Some(Action::CloseHelp), "Esc closes the help first");
        assert_eq!(key_action(&key(KeyCode::Char('x'), none), &app), Some(Action::CloseHelp));
        assert_eq!(key_action(&key(KeyCode::Char('c'), ctrl), &app), Some(Action::Quit));
    }

    #[test]
    fn the_model_list_takes_the_arrows_enter_and_esc_while_shown() {
        let mut app = test_app();
        let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
        assert_eq!(key_action(&key(KeyCode::F(8)), &app), Some(Action::ToggleModels));
        assert_eq!(key_action(&key(KeyCode::Enter), &app), Some(Action::RunNow));
        app.apply(Action::ToggleModels);
        assert!(app.models().is_some());
        assert_eq!(key_action(&key(KeyCode::Down), &app), Some(Action::MoveModel(1)));
        assert_eq!(key_action(&key(KeyCode::Up), &app), Some(Action::MoveModel(-1)));
        assert_eq!(key_action(&key(KeyCode::Enter), &app), Some(Action::ChooseModel));
        assert_eq!(key_action(&key(KeyCode::Esc), &app), Some(Action::CloseModels), "Esc closes the list, not the explorer");
        assert_eq!(key_action(&key(KeyCode::F(8)), &app), Some(Action::CloseModels));
        assert_eq!(key_action(&key(KeyCode::Char('q')), &app), None, "letters are not text under the list");
        assert_eq!(key_action(&KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL), &app), Some(Action::Quit));
    }
}
