"""An OpenEnv environment written with openenv-core's own server classes: guess a number.

The environment hides a number from 0 to 9 (``seed % 10`` at reset); the action is
``{"guess": N}``; each wrong guess observes ``higher`` or ``lower`` with reward 0, the right one
ends the episode with reward 1, the fifth wrong one ends it with reward 0.

Run it with the interpreter of an environment that holds openenv-core (see
docs/integrations/openenv.md): ``python guess_server.py PORT`` serves it on 127.0.0.1:PORT. Or
let veriloop start it in the sandbox for each episode: a task names it as ``"app":
"guess_server:app"`` with ``"app_dir"`` this folder and ``"environment"`` that environment.
"""

import sys

import uvicorn
from pydantic import Field
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State


class GuessAction(Action):
    guess: int = Field(description="the number you guess")


class GuessObservation(Observation):
    text: str = ""
    misses_left: int = 5


class GuessEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        self._state = State(step_count=0)
        self.target, self.misses = 0, 0

    def reset(self, seed=None, episode_id=None):
        self._state = State(episode_id=episode_id, step_count=0)
        self.target, self.misses = (seed or 0) % 10, 0
        return GuessObservation(text="Guess a number from 0 to 9.", misses_left=5)

    def step(self, action):
        self._state.step_count += 1
        if action.guess == self.target:
            return GuessObservation(text="correct", misses_left=5 - self.misses, done=True, reward=1.0)
        self.misses += 1
        hint = "higher" if action.guess < self.target else "lower"
        return GuessObservation(text=hint, misses_left=5 - self.misses, done=self.misses >= 5, reward=0.0)

    @property
    def state(self):
        return self._state

    def get_metadata(self):
        return EnvironmentMetadata(name="guess", description="Find the hidden number from 0 to 9.", version="1.0.0")


app = create_app(GuessEnvironment, GuessAction, GuessObservation, env_name="guess", max_concurrent_envs=8)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
