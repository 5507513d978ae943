"""FizzBuzz with Python control flow over tensors
Because eager tensors hold real values, an ordinary Python `if` can branch on
them: the condition is computed by TensorFlow and read by Python on the spot.
This loop walks a tf.range and decides what to print from each tensor's value.
"""
import tensorflow as tf


def fizzbuzz(max_num):
    counter = tf.constant(0)
    max_num = tf.convert_to_tensor(max_num)
    for num in tf.range(1, max_num + 1):
        # num % 3 is a tensor; int() reads its value so Python can branch on it.
        if int(num % 3) == 0 and int(num % 5) == 0:
            print("FizzBuzz")
        elif int(num % 3) == 0:
            print("Fizz")
        elif int(num % 5) == 0:
            print("Buzz")
        else:
            print(num.numpy())
        counter += 1
    return counter


count = fizzbuzz(15)
print("count =", count.numpy())
