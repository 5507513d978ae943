"""Actor-critic on a cart-pole, in the style of TensorFlow's actor-critic tutorial: one
GradientTape around a whole episode (up to MAX_STEPS timesteps), the actor's log-probabilities
and the critic's values collected per timestep, then the advantage-weighted actor loss and
the critic's Huber loss. The cart-pole is written here in NumPy (the classic equations), so
no gym is needed; its episodes run on after the pole falls (no reward while it is down), so
each is long. Runs eagerly; prints each episode's length, reward and loss."""
import numpy as np
import tensorflow as tf
import keras

SEED, EPISODES, MAX_STEPS, GAMMA = 0, 2, 150, 0.99
tf.random.set_seed(SEED)
keras.utils.set_random_seed(SEED)


class CartPole:
    """The cart-pole balance task: push the cart left or right to keep the pole up."""
    gravity, cart_mass, pole_mass, half_length, force, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    track = 4.8                   # the cart's room either side (the classic task has 2.4)

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.state = None

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force if action == 1 else -self.force
        total = self.cart_mass + self.pole_mass
        cos, sin = np.cos(theta), np.sin(theta)
        temp = (force + self.pole_mass * self.half_length * theta_dot ** 2 * sin) / total
        theta_acc = (self.gravity * sin - cos * temp) / (
            self.half_length * (4.0 / 3.0 - self.pole_mass * cos ** 2 / total))
        x_acc = temp - self.pole_mass * self.half_length * theta_acc * cos / total
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * x_acc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        # A reward for each timestep the pole is up; a fallen pole swings on, so every
        # episode lasts until the cart leaves the track or MAX_STEPS
        upright = abs(np.arctan2(np.sin(theta), np.cos(theta))) < 12 * np.pi / 180
        return self.state.astype(np.float32), np.float32(upright), np.int32(abs(x) > self.track)


class ActorCritic(keras.Model):
    """One shared hidden layer, then the actor's logits and the critic's value."""

    def __init__(self, actions, hidden):
        super().__init__()
        self.common = keras.layers.Dense(hidden, activation="relu", name="common")
        self.actor = keras.layers.Dense(actions, name="actor")
        self.critic = keras.layers.Dense(1, name="critic")

    def call(self, inputs):
        x = self.common(inputs)
        return self.actor(x), self.critic(x)


env = CartPole(SEED)
model = ActorCritic(actions=2, hidden=32)
optimizer = keras.optimizers.Adam(learning_rate=0.01)
huber = keras.losses.Huber(reduction="sum")


def env_step(action):
    return env.step(int(action))


def run_episode(initial_state, max_steps):
    """Run the model for one episode, collecting what the loss needs."""
    action_probs = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    values = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    rewards = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    state = initial_state
    for t in range(max_steps):
        state = tf.expand_dims(state, 0)
        action_logits_t, value = model(state)
        action = tf.random.categorical(action_logits_t, 1)[0, 0]
        action_probs_t = tf.nn.softmax(action_logits_t)
        values = values.write(t, tf.squeeze(value))
        action_probs = action_probs.write(t, action_probs_t[0, action])
        state, reward, done = tf.numpy_function(env_step, [action],
                                                [tf.float32, tf.float32, tf.int32])
        state.set_shape(initial_state.shape)
        rewards = rewards.write(t, reward)
        if tf.cast(done, tf.bool):
            break
    return action_probs.stack(), values.stack(), rewards.stack()


def expected_return(rewards, gamma):
    """Discounted returns per timestep, standardized."""
    n = tf.shape(rewards)[0]
    returns = tf.TensorArray(tf.float32, size=n)
    rewards = tf.cast(rewards[::-1], tf.float32)
    discounted_sum = tf.constant(0.0)
    for i in tf.range(n):
        discounted_sum = rewards[i] + gamma * discounted_sum
        returns = returns.write(i, discounted_sum)
    returns = returns.stack()[::-1]
    return (returns - tf.math.reduce_mean(returns)) / (tf.math.reduce_std(returns) + 1e-7)


def compute_loss(action_probs, values, returns):
    advantage = returns - values
    actor_loss = -tf.math.reduce_sum(tf.math.log(action_probs) * advantage)
    critic_loss = huber(values, returns)
    return actor_loss + critic_loss


for episode in range(EPISODES):
    initial_state = tf.constant(env.reset(), dtype=tf.float32)
    with tf.GradientTape() as tape:
        action_probs, values, rewards = run_episode(initial_state, MAX_STEPS)
        returns = expected_return(rewards, GAMMA)
        loss = compute_loss(action_probs, values, returns)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    print(f"episode {episode}: {len(rewards)} timesteps, reward "
          f"{float(tf.reduce_sum(rewards)):.0f}, loss {float(loss):.4f}")
